//===- ImportONNX.cpp - ONNX models into the fsdp/onnx dialects -----------===//
//
/// Import runs in four steps:
///  1. readModel parses the protobuf without the large weights (their byte
///     ranges are recorded instead) and external data is resolved and bounds-
///     checked against the data files' sizes, never read.
///  2. Dynamic dimensions are specialised (batch size, named dims), then
///     ONNX's checker and shape inference (with data propagation, so torch's
///     shape chains get static types) run on the model.
///  3. Initializers are classified with the frontend's metadata (or naming
///     rules without it): parameters and buffers become fsdp.param /
///     fsdp.buffer symbols with data references, the rest constants.
///  4. Nodes become onnx ops in @forward, located at their node names, then
///     shape computations are folded.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Import/ImportONNX.h"

#include "ModelReader.h"
#include "Sequences.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOpTable.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/Support/JSON.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;
using ::fsdp::onnx_import::EmbeddedBytes;
using ::fsdp::onnx_import::ModelFile;
using mlir::fsdp::FSDPDialect;
namespace fsdpir = mlir::fsdp;

namespace {

constexpr int64_t kMinOpset = 13;
/// Shape computations folded at import produce at most this many elements,
/// or kMaxFoldedIndices when they are integers or booleans: index tables
/// computed from shapes (BEiT's relative position index is 197 x 197 at
/// 224 x 224 pixels).
constexpr int64_t kMaxFoldedElements = 4096;
constexpr int64_t kMaxFoldedIndices = 1 << 20;
/// The constants the import's rewrites make (an EyeLike's matrix, a TopK's
/// or a GatherND's index tables) have at most this many elements.
constexpr int64_t kMaxRewriteConstant = 1 << 24;
constexpr int64_t kMaxOpset = 17;

/// What an initializer is to the FSDP passes.
enum class InitKind { Param, Buffer, Constant };

struct InitInfo {
  InitKind kind = InitKind::Constant;
  std::string fqn;
  bool requiresGrad = true;
  SmallVector<std::string> aliases;
};

/// The part of the frontend's metadata the importer uses: initializer name ->
/// what it is. Absent for models from other exporters.
struct Metadata {
  llvm::StringMap<InitInfo> initializers;
  std::string json;
};

class Importer {
public:
  Importer(StringRef path, MLIRContext &context,
           const ::fsdp::ONNXImportOptions &options)
      : path(path.str()), context(context), options(options),
        builder(&context),
        fileLoc(FileLineColLoc::get(&context, path, 0, 0)) {
    SmallString<256> dir(path);
    llvm::sys::path::remove_filename(dir);
    modelDir = dir.empty() ? "." : std::string(dir);
  }

  OwningOpRef<ModuleOp> run();

private:
  LogicalResult error(const Twine &message) {
    emitError(fileLoc) << message;
    return failure();
  }

  LogicalResult checkOpsets();
  LogicalResult convertOldOpset();
  LogicalResult resolveExternalData();
  LogicalResult specialiseShapes();
  LogicalResult check();
  LogicalResult readMetadata();
  LogicalResult classify();
  FailureOr<Type> convertElementType(int32_t onnxType, StringRef what);
  FailureOr<RankedTensorType> convertTensorType(const onnx::TypeProto &type,
                                                StringRef what,
                                                bool quiet = false);
  FailureOr<fsdpir::DataRefAttr> dataRef(int index);
  FailureOr<ElementsAttr> constantValue(int index);
  FailureOr<ElementsAttr> tensorValue(const onnx::TensorProto &tensor,
                                      const std::optional<EmbeddedBytes> &bytes,
                                      StringRef what);
  LogicalResult declareState(ModuleOp module);
  LogicalResult buildForward(ModuleOp module);
  FailureOr<Value> lookupValue(const std::string &name, Location loc);
  LogicalResult buildNode(const onnx::NodeProto &node);
  /// A node's label (its name, or its op_type when unnamed) as a location.
  Location nodeLoc(const onnx::NodeProto &node) {
    return NameLoc::get(
        StringAttr::get(&context,
                        node.name().empty() ? node.op_type() : node.name()),
        fileLoc);
  }
  FailureOr<Operation *> createNodeOp(OpBuilder &b, const onnx::NodeProto &node,
                                      ValueRange operands,
                                      ArrayRef<std::string> outputs);
  LogicalResult infer();
  LogicalResult foldShapeComputations();
  FailureOr<int> inlineConstantIfs(
      const llvm::StringMap<DenseElementsAttr> &constants);
  FailureOr<Attribute> convertAttribute(const onnx::AttributeProto &attr,
                                        const onnx::NodeProto &node);

  std::string path, modelDir;
  MLIRContext &context;
  const ::fsdp::ONNXImportOptions &options;
  OpBuilder builder;
  Location fileLoc;
  ModelFile file;
  Metadata metadata;
  int64_t opset = 0;
  /// Initializers that ONNX's version converter added (constants).
  llvm::StringSet<> convertedConstants;

  /// Per initializer (graph order): its classification and where its bytes
  /// are: (file relative to the model's directory, offset, length).
  std::vector<InitInfo> inits;
  struct Bytes {
    std::string file;
    int64_t offset = 0, length = 0;
    bool external = false;
  };
  std::vector<std::optional<Bytes>> bytes;
  llvm::StringMap<int> initIndex;
  llvm::StringMap<onnx::TypeProto> valueTypes;

  // While building @forward.
  llvm::StringMap<Value> values;
  Value noValue;
};

//===----------------------------------------------------------------------===//
// Reading and checking
//===----------------------------------------------------------------------===//

/// Checks an initializer's dimensions: non-negative, with a product that
/// fits int64.
LogicalResult checkDims(const onnx::TensorProto &tensor,
                        function_ref<InFlightDiagnostic()> emit) {
  int64_t count = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return emit() << "initializer '" << tensor.name()
                    << "' has a negative dimension " << dim;
    std::optional<int64_t> product = llvm::checkedMul(count, dim);
    if (!product)
      return emit() << "initializer '" << tensor.name()
                    << "' has more elements than int64 can count";
    count = *product;
  }
  return success();
}

/// Checks that a tensor's raw_data, when the parsed proto holds it, has the
/// bytes its dims and element type need. ONNX 1.12's shape inference reads
/// such values (data propagation) without checking and crashes on a short
/// one (found by fuzz.onnx-importer).
LogicalResult checkRawSize(const onnx::TensorProto &tensor, StringRef what,
                           function_ref<InFlightDiagnostic()> emit) {
  if (!tensor.has_raw_data())
    return success();
  int64_t width = 0;
  switch (tensor.data_type()) {
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    width = 1;
    break;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    width = 2;
    break;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    width = 4;
    break;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::COMPLEX64:
    width = 8;
    break;
  case onnx::TensorProto::COMPLEX128:
    width = 16;
    break;
  default: // strings and unknown types are refused later, by name
    return success();
  }
  std::optional<int64_t> needed = width;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return emit() << what << " has a negative dimension " << dim;
    if (needed)
      needed = llvm::checkedMul(*needed, dim);
  }
  int64_t have = static_cast<int64_t>(tensor.raw_data().size());
  if (!needed || *needed != have)
    return emit() << what << " holds " << have << " bytes but its shape needs "
                  << (needed ? std::to_string(*needed) : "more than int64 counts");
  return success();
}

std::string oneLine(StringRef message);

/// Writes all of `data` to `fd`; false if the pipe broke.
bool writeAll(int fd, const std::string &data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// What a forked child sent back, and how it ended.
struct ChildResult {
  std::string reply;
  /// The signal that ended the child, or 0.
  int signal = 0;
  /// Its exit status when it exited (-1 when a signal ended it).
  int exitStatus = -1;
};

/// Runs `work` in a forked child and collects the bytes it returns. ONNX
/// 1.12's shape inference and version converter crash or abort on some
/// models (fuzz.onnx-importer keeps finding them), and a crash in ONNX must
/// be an error from fsdp-opt, not its end. Returns "" or why no child ran.
std::string runInChild(StringRef what, function_ref<std::string()> work,
                       ChildResult &result) {
  int fds[2];
  if (::pipe(fds) != 0)
    return "cannot run " + what.str() + ": pipe: " + std::strerror(errno);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "cannot run " + what.str() + ": fork: " + std::strerror(errno);
  }
  if (pid == 0) {
    ::close(fds[0]);
    // A crash here ends this child quietly; the parent reports it (the
    // parent's crash handlers, LLVM's or a sanitizer's, would report it as
    // its own).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      std::signal(sig, SIG_DFL);
    std::string reply;
    try {
      reply = work();
    } catch (const std::exception &e) {
      reply = std::string("E") + e.what();
    }
    ::_exit(writeAll(fds[1], reply) ? 0 : 3);
  }
  ::close(fds[1]);
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    result.reply.append(chunk, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    result.signal = WTERMSIG(status);
  else if (WIFEXITED(status))
    result.exitStatus = WEXITSTATUS(status);
  return "";
}

/// Runs ONNX's shape inference (types checked, errors collected, data
/// propagated) on `model` in a forked child and replaces `model` with the
/// inferred one; returns "" or the error. The model holds no large weights
/// (ModelReader strips them), so sending it back is cheap.
std::string inferInChild(onnx::ModelProto &model) {
  ChildResult child;
  if (std::string why = runInChild(
          "ONNX shape inference",
          [&] {
            onnx::ShapeInferenceOptions inference(
                /*check_type=*/true, /*error_mode=*/1,
                /*enable_data_propagation=*/true);
            onnx::shape_inference::InferShapes(
                model, onnx::OpSchemaRegistry::Instance(), inference);
            return "M" + model.SerializeAsString();
          },
          child);
      !why.empty())
    return why;
  const std::string &reply = child.reply;
  if (child.signal)
    return "ONNX shape inference crashed on this model (signal " +
           std::to_string(child.signal) + ", " + ::strsignal(child.signal) +
           "): ONNX 1.12 crashes on some malformed models its checker "
           "accepts; check the model's attributes and constant values";
  if (child.exitStatus != 0 || reply.empty())
    return "ONNX shape inference did not finish (exit status " +
           std::to_string(child.exitStatus) + ")";
  if (reply[0] == 'E')
    return "ONNX shape inference: " + oneLine(StringRef(reply).drop_front());
  onnx::ModelProto inferred;
  if (!inferred.ParseFromArray(reply.data() + 1,
                               static_cast<int>(reply.size() - 1)))
    return "ONNX shape inference returned a model that cannot be read back";
  // What inference adds: value_info and the graph's input/output types.
  // Copied into `model` in place: callers hold pointers into its graph.
  onnx::GraphProto *graph = model.mutable_graph();
  onnx::GraphProto *result = inferred.mutable_graph();
  if (result->input_size() != graph->input_size() ||
      result->output_size() != graph->output_size() ||
      result->node_size() != graph->node_size())
    return "ONNX shape inference changed the graph's inputs, outputs or nodes";
  for (int i = 0; i < graph->input_size(); ++i)
    graph->mutable_input(i)->CopyFrom(result->input(i));
  for (int i = 0; i < graph->output_size(); ++i)
    graph->mutable_output(i)->CopyFrom(result->output(i));
  graph->mutable_value_info()->Swap(result->mutable_value_info());
  return "";
}

/// Converts `model` to opset `target` with ONNX's version converter in a
/// forked child (some of its adapters abort rather than throw). Shape
/// inference runs first: adapters such as Softmax 12->13 need the input's
/// shape. Returns "" and sets `converted`, or the reason (one line).
std::string convertInChild(const onnx::ModelProto &model, int64_t target,
                           onnx::ModelProto &converted) {
  ChildResult child;
  if (std::string why = runInChild(
          "ONNX's version converter",
          [&] {
            onnx::ModelProto typed = model;
            onnx::ShapeInferenceOptions inference(
                /*check_type=*/false, /*error_mode=*/0,
                /*enable_data_propagation=*/false);
            onnx::shape_inference::InferShapes(
                typed, onnx::OpSchemaRegistry::Instance(), inference);
            onnx::ModelProto out = onnx::version_conversion::ConvertVersion(
                typed, static_cast<int>(target));
            return "M" + out.SerializeAsString();
          },
          child);
      !why.empty())
    return why;
  if (child.signal)
    return std::string("it crashed (signal ") + std::to_string(child.signal) +
           ", " + ::strsignal(child.signal) + ")";
  if (child.exitStatus != 0 || child.reply.empty())
    return "it did not finish (exit status " +
           std::to_string(child.exitStatus) + ")";
  if (child.reply[0] == 'E') {
    std::string why = oneLine(StringRef(child.reply).drop_front());
    return why.empty() ? "it failed without a message" : why;
  }
  if (!converted.ParseFromArray(child.reply.data() + 1,
                                static_cast<int>(child.reply.size() - 1)))
    return "it returned a model that cannot be read back";
  return "";
}

/// ONNX's multi-line messages as one line: whitespace runs become a space.
std::string oneLine(StringRef message) {
  std::string result;
  for (char c : message.trim()) {
    bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (result.empty() || result.back() == ' '))
      continue;
    result.push_back(space ? ' ' : c);
  }
  return result;
}

LogicalResult Importer::checkOpsets() {
  for (const onnx::OperatorSetIdProto &import : file.model.opset_import()) {
    if (import.domain().empty() || import.domain() == "ai.onnx") {
      opset = import.version();
    }
  }
  if (opset == 0)
    return error("the model imports no opset of the default ONNX domain");
  if (opset > kMaxOpset)
    return error("opset " + Twine(opset) + " is newer than this compiler's "
                 "ONNX library reads (1 to " + Twine(kMaxOpset) +
                 "); convert the model with `python -m fsdp_mlir.opset "
                 "MODEL OUT.onnx` (ONNX's version converter in torch 2.x's "
                 "environment; fsdp_mlir.compile does it by itself) or "
                 "re-export with opset_version=17");
  if (opset < 1)
    return error("opset " + Twine(opset) + " is not supported (supported: " +
                 "1 to " + Twine(kMaxOpset) + ", those below " +
                 Twine(kMinOpset) + " converted to " + Twine(kMinOpset) +
                 " by ONNX's version converter); re-export with "
                 "opset_version=17");
  if (opset < kMinOpset && failed(convertOldOpset()))
    return failure();
  // ONNX 1.12's own shape inference overflows on Slice steps near the int64
  // range (it crashes); no real model needs them.
  llvm::StringMap<const onnx::TensorProto *> constantTensors;
  for (const onnx::TensorProto &tensor : file.model.graph().initializer())
    constantTensors[tensor.name()] = &tensor;
  for (const onnx::NodeProto &node : file.model.graph().node())
    if (node.op_type() == "Constant" && node.output_size() == 1)
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "value" && attr.has_t())
          constantTensors[node.output(0)] = &attr.t();
  for (const onnx::NodeProto &node : file.model.graph().node()) {
    if (node.op_type() != "Slice" || node.input_size() < 5)
      continue;
    const onnx::TensorProto *steps = constantTensors.lookup(node.input(4));
    if (!steps || steps->data_type() != onnx::TensorProto::INT64)
      continue;
    std::vector<int64_t> values(steps->int64_data().begin(),
                                steps->int64_data().end());
    if (steps->has_raw_data() && steps->raw_data().size() % 8 == 0) {
      values.resize(steps->raw_data().size() / 8);
      std::memcpy(values.data(), steps->raw_data().data(),
                  steps->raw_data().size());
    }
    for (int64_t step : values)
      if (step > INT32_MAX || step < -static_cast<int64_t>(INT32_MAX))
        return emitError(nodeLoc(node))
               << "node '" << node.name() << "' (Slice) has step " << step
               << ", outside the supported range of +-" << INT32_MAX;
  }
  for (const onnx::NodeProto &node : file.model.graph().node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return emitError(nodeLoc(node))
             << "node '" << node.name() << "' (" << node.op_type()
             << ") is in the unsupported domain '" << node.domain()
             << "'; only the default ONNX domain is supported";
    if (node.op_type() == "Constant")
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.has_t() &&
            failed(checkRawSize(attr.t(),
                                "the value of node '" + node.name() +
                                    "' (Constant)",
                                [&] { return emitError(nodeLoc(node)); })))
          return failure();
    // ONNX 1.12's Transpose inference indexes the input's dims by `perm`
    // unchecked (it crashes; found by fuzz.onnx-importer).
    if (node.op_type() == "Transpose")
      for (const onnx::AttributeProto &attr : node.attribute()) {
        if (attr.name() != "perm")
          continue;
        std::vector<bool> seen(attr.ints_size());
        bool permutation = true;
        for (int64_t axis : attr.ints()) {
          permutation &= axis >= 0 && axis < attr.ints_size() && !seen[axis];
          if (!permutation)
            break;
          seen[axis] = true;
        }
        if (!permutation) {
          std::string text;
          for (int64_t axis : attr.ints())
            text += (text.empty() ? "" : ", ") + std::to_string(axis);
          return emitError(nodeLoc(node))
                 << "node '" << node.name() << "' (Transpose) has perm ["
                 << text << "], which is not a permutation of 0.."
                 << attr.ints_size() - 1;
        }
      }
  }
  return success();
}

/// The model's first `count` nodes, the last one's outputs as the graph's
/// outputs.
static onnx::ModelProto nodePrefix(const onnx::ModelProto &model, int count) {
  onnx::ModelProto prefix = model;
  onnx::GraphProto *graph = prefix.mutable_graph();
  graph->mutable_node()->DeleteSubrange(count, graph->node_size() - count);
  graph->clear_output();
  graph->clear_value_info();
  for (const std::string &output : graph->node(count - 1).output())
    if (!output.empty())
      graph->add_output()->set_name(output);
  return prefix;
}

/// The converter works on ONNX's in-memory IR, which drops external data:
/// weights come back as empty tensors of their type and shape. They are put
/// back by name from the original (with where their bytes lie); the
/// converter's own new initializers (Pad's pads, ...) are constants.
LogicalResult Importer::convertOldOpset() {
  onnx::ModelProto converted;
  std::string why = convertInChild(file.model, kMinOpset, converted);
  if (!why.empty()) {
    // Adapters fail on one node, and a prefix of the graph fails iff it
    // holds that node (nodes are converted in order): bisect for it.
    const onnx::GraphProto &graph = file.model.graph();
    int good = 0, bad = graph.node_size();
    std::string badWhy = why;
    onnx::ModelProto ignored;
    if (bad > 0) {
      std::string last = convertInChild(nodePrefix(file.model, bad), kMinOpset,
                                        ignored);
      if (last.empty())
        bad = 0; // Only the whole model fails: no node to blame.
      else
        badWhy = last;
    }
    while (bad > 0 && bad - good > 1) {
      int middle = good + (bad - good) / 2;
      std::string result = convertInChild(nodePrefix(file.model, middle),
                                          kMinOpset, ignored);
      if (result.empty()) {
        good = middle;
      } else {
        bad = middle;
        badWhy = result;
      }
    }
    if (bad == 0)
      return error("ONNX's version converter cannot convert this model from "
                   "opset " + Twine(opset) + " to " + Twine(kMinOpset) + ": " +
                   why);
    const onnx::NodeProto &node = graph.node(bad - 1);
    return emitError(nodeLoc(node))
           << "node '" << (node.name().empty() ? node.op_type() : node.name())
           << "' (" << node.op_type()
           << "): ONNX's version converter cannot convert it from opset "
           << opset << " to " << kMinOpset << ": " << badWhy;
  }

  const onnx::GraphProto &graph = file.model.graph();
  llvm::StringMap<int> original;
  for (int i = 0; i < graph.initializer_size(); ++i)
    original[graph.initializer(i).name()] = i;
  std::vector<std::optional<EmbeddedBytes>> embedded;
  for (onnx::TensorProto &tensor :
       *converted.mutable_graph()->mutable_initializer()) {
    auto known = original.find(tensor.name());
    if (known == original.end()) {
      convertedConstants.insert(tensor.name());
      embedded.push_back(std::nullopt);
      continue;
    }
    tensor = graph.initializer(known->second);
    embedded.push_back(file.embedded[known->second]);
  }
  if (converted.metadata_props_size() == 0)
    *converted.mutable_metadata_props() = file.model.metadata_props();
  // The converter keeps the old IR version, but IR 3 wants every
  // initializer listed as a graph input, which the ones it adds are not;
  // opset 13 belongs to IR 7.
  converted.set_ir_version(std::max<int64_t>(converted.ir_version(), 7));
  // Nor does it drop outputs an operator no longer has (BatchNormalization
  // had five before opset 9, three since): unused ones are left out.
  llvm::StringSet<> used;
  for (const onnx::NodeProto &node : converted.graph().node())
    for (const std::string &input : node.input())
      used.insert(input);
  for (const onnx::ValueInfoProto &output : converted.graph().output())
    used.insert(output.name());
  for (onnx::NodeProto &node : *converted.mutable_graph()->mutable_node()) {
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
        node.op_type(), static_cast<int>(kMinOpset), node.domain());
    if (!schema)
      continue;
    int most = schema->max_output();
    while (node.output_size() > most) {
      const std::string &last = node.output(node.output_size() - 1);
      if (!last.empty() && used.contains(last))
        break;
      node.mutable_output()->RemoveLast();
    }
  }
  emitRemark(fileLoc) << "converted '" << llvm::sys::path::filename(path)
                      << "' from opset " << opset << " to " << kMinOpset
                      << " with ONNX's version converter";
  file.model = std::move(converted);
  file.embedded = std::move(embedded);
  opset = kMinOpset;
  return success();
}

LogicalResult Importer::resolveExternalData() {
  const onnx::GraphProto &graph = file.model.graph();
  bytes.resize(graph.initializer_size());
  llvm::StringMap<uint64_t> fileSizes;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto &tensor = graph.initializer(i);
    if (failed(checkDims(tensor, [&] { return emitError(fileLoc); })) ||
        failed(checkRawSize(tensor, "initializer '" + tensor.name() + "'",
                            [&] { return emitError(fileLoc); })))
      return failure();
    initIndex[tensor.name()] = i;
    const std::optional<EmbeddedBytes> &embedded = file.embedded[i];
    // Bytes inside the .onnx itself (stripped or not) need no path checks:
    // the model file may well be a symbolic link into a cache.
    if (embedded) {
      bytes[i] = Bytes{llvm::sys::path::filename(path).str(), embedded->offset,
                       embedded->length, false};
      continue;
    }
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    Bytes ref;
    ref.external = !embedded;
    bool hasLength = false;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      auto number = [&](int64_t &out) -> LogicalResult {
        if (StringRef(entry.value()).getAsInteger(10, out) || out < 0)
          return error("initializer '" + tensor.name() + "': external data " +
                       entry.key() + " '" + entry.value() +
                       "' is not a non-negative integer");
        return success();
      };
      if (entry.key() == "location") {
        ref.file = entry.value();
      } else if (entry.key() == "offset") {
        if (failed(number(ref.offset)))
          return failure();
      } else if (entry.key() == "length") {
        if (failed(number(ref.length)))
          return failure();
        hasLength = true;
      }
    }
    if (ref.file.empty())
      return error("initializer '" + tensor.name() +
                   "' has external data but no location");
    bool escapes = llvm::sys::path::is_absolute(ref.file) ||
                   llvm::any_of(llvm::make_range(
                                    llvm::sys::path::begin(ref.file),
                                    llvm::sys::path::end(ref.file)),
                                [](StringRef part) { return part == ".."; });
    SmallString<256> full(modelDir);
    llvm::sys::path::append(full, ref.file);
    auto [it, inserted] = fileSizes.try_emplace(full, 0);
    if (inserted) {
      // Resolve symbolic links before deciding where the file really is.
      SmallString<256> real, realDir;
      if (!escapes && !llvm::sys::fs::real_path(full, real) &&
          !llvm::sys::fs::real_path(modelDir, realDir))
        escapes = !StringRef(real).starts_with(
            (realDir + llvm::sys::path::get_separator()).str());
      if (escapes)
        return error("initializer '" + tensor.name() +
                     "': external data path '" + ref.file +
                     "' must stay inside the model's directory");
      llvm::sys::fs::file_status status;
      if (std::error_code ec = llvm::sys::fs::status(full, status))
        return error("initializer '" + tensor.name() +
                     "': external data file '" + full.str() + "': " +
                     ec.message());
      if (!llvm::sys::fs::is_regular_file(status))
        return error("initializer '" + tensor.name() +
                     "': external data file '" + full.str() +
                     "' is not a regular file");
      it->second = status.getSize();
    }
    int64_t fileSize = static_cast<int64_t>(it->second);
    if (ref.offset > fileSize)
      return error("initializer '" + tensor.name() + "': offset " +
                   Twine(ref.offset) + " lies past the end of '" + full.str() +
                   "' (" + Twine(fileSize) + " bytes)");
    if (!hasLength)
      ref.length = fileSize - ref.offset;
    if (ref.length > fileSize - ref.offset)
      return error("initializer '" + tensor.name() + "': " +
                   Twine(ref.length) + " bytes at offset " + Twine(ref.offset) +
                   " lie past the end of '" + full.str() + "' (" +
                   Twine(fileSize) + " bytes)");
    bytes[i] = std::move(ref);
  }
  return success();
}

LogicalResult Importer::specialiseShapes() {
  onnx::GraphProto *graph = file.model.mutable_graph();
  for (onnx::ValueInfoProto &input : *graph->mutable_input()) {
    if (initIndex.count(input.name()))
      continue; // Old-style models list initializers as inputs.
    if (!input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      return error("graph input '" + input.name() + "' has no tensor shape");
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int d = 0; d < shape->dim_size(); ++d) {
      onnx::TensorShapeProto_Dimension *dim = shape->mutable_dim(d);
      if (dim->has_dim_value()) {
        if (dim->dim_value() < 0)
          return error("graph input '" + input.name() + "' has a negative " +
                       "dimension " + Twine(dim->dim_value()) + " (at index " +
                       Twine(d) + ")");
        continue;
      }
      std::string name = dim->has_dim_param() ? dim->dim_param() : "";
      auto named = options.dims.find(name);
      if (!name.empty() && named != options.dims.end()) {
        dim->set_dim_value(named->second);
      } else if (d == 0 && options.batchSize) {
        dim->set_dim_value(*options.batchSize);
      } else if (d == 0) {
        return error("graph input '" + input.name() +
                     "' has a dynamic dimension 0" +
                     (name.empty() ? "" : " ('" + name + "')") +
                     "; give its size with --batch-size=N (the compiler "
                     "never guesses a size)");
      } else if (!name.empty()) {
        return error("graph input '" + input.name() + "' has a dynamic " +
                     "dimension " + Twine(d) + " ('" + name +
                     "'); give its size with --dim=" + name +
                     "=N (the compiler never guesses a size)");
      } else {
        return error("graph input '" + input.name() + "' has an unnamed " +
                     "dynamic dimension " + Twine(d) +
                     ", which no option can set; re-export with a static " +
                     "size or a named dynamic axis (dynamic_axes)");
      }
    }
  }
  // Shapes recorded by the exporter may still be symbolic; inference
  // recomputes them all from the now static inputs.
  graph->clear_value_info();
  if (graph->output_size() == 0)
    return error("the graph has no outputs, so its plan would compute "
                 "nothing; export with the tensors it returns as outputs");
  for (const onnx::ValueInfoProto &output : graph->output())
    if (!output.type().has_tensor_type() ||
        !output.type().tensor_type().has_shape())
      return error("graph output '" + output.name() +
                   "' declares no tensor shape, which ONNX's checker "
                   "requires; export with output shapes");
  // Symbolic output dimensions become unknown (ONNX's checker wants the
  // shape itself kept).
  for (onnx::ValueInfoProto &output : *graph->mutable_output())
    if (output.type().has_tensor_type() &&
        output.type().tensor_type().has_shape())
      for (onnx::TensorShapeProto_Dimension &dim : *output.mutable_type()
                                                       ->mutable_tensor_type()
                                                       ->mutable_shape()
                                                       ->mutable_dim())
        if (dim.has_dim_param())
          dim.clear_dim_param();
  return success();
}

LogicalResult Importer::check() {
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(file.model.ir_version()));
    std::unordered_map<std::string, int> imports;
    for (const onnx::OperatorSetIdProto &import : file.model.opset_import())
      imports[import.domain()] = static_cast<int>(import.version());
    ctx.set_opset_imports(imports);
    ctx.set_model_dir(modelDir);
    if (file.model.ir_version() == 0)
      return error("ONNX checker: the model has no ir_version");
    if (file.model.ir_version() > onnx::IR_VERSION)
      return error("ONNX checker: ir_version " +
                   Twine(file.model.ir_version()) +
                   " is newer than this ONNX library supports (" +
                   Twine(onnx::IR_VERSION) + ")");
    onnx::checker::LexicalScopeContext lex;
    onnx::checker::check_graph(file.model.graph(), ctx, lex);
  } catch (const std::exception &e) {
    return error("ONNX checker: " + oneLine(e.what()));
  }
  return success();
}

LogicalResult Importer::infer() {
  if (std::string why = inferInChild(file.model); !why.empty())
    return error(why);
  const onnx::GraphProto &graph = file.model.graph();
  valueTypes.clear();
  for (const auto &list : {graph.input(), graph.output(), graph.value_info()})
    for (const onnx::ValueInfoProto &info : list)
      valueTypes[info.name()] = info.type();
  // Initializers that are not graph inputs have no value_info: their
  // tensors give their types (the Shape of a parameter folds: torch 1.13
  // resizes a position table to Shape(table)[:2] + sizes).
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    if (valueTypes.count(tensor.name()))
      continue;
    onnx::TypeProto type;
    onnx::TypeProto_Tensor *tensorType = type.mutable_tensor_type();
    tensorType->set_elem_type(tensor.data_type());
    onnx::TensorShapeProto *shape = tensorType->mutable_shape();
    for (int64_t dim : tensor.dims())
      shape->add_dim()->set_dim_value(dim);
    valueTypes[tensor.name()] = std::move(type);
  }
  return success();
}

LogicalResult Importer::readMetadata() {
  for (const onnx::StringStringEntryProto &entry : file.model.metadata_props()) {
    if (entry.key() != "fsdp_mlir")
      continue;
    metadata.json = entry.value();
    if (std::string why = fsdpir::checkJSONBounds(entry.value()); !why.empty())
      return error("metadata 'fsdp_mlir' " + why);
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(entry.value());
    if (!parsed)
      return error("metadata 'fsdp_mlir' is not valid JSON: " +
                   llvm::toString(parsed.takeError()));
    llvm::json::Object *root = parsed->getAsObject();
    if (!root || root->getInteger("version") != 1)
      return error("metadata 'fsdp_mlir' is not version 1 of the frontend's "
                   "schema; re-export with this version's fsdp_mlir.export");
    auto table = [&](StringRef key, InitKind kind) -> LogicalResult {
      llvm::json::Array *list = root->getArray(key);
      if (!list)
        return error("metadata 'fsdp_mlir' has no '" + key + "' list");
      for (llvm::json::Value &item : *list) {
        llvm::json::Object *entry = item.getAsObject();
        std::optional<StringRef> fqn = entry ? entry->getString("fqn") : std::nullopt;
        if (!fqn)
          return error("metadata 'fsdp_mlir': an entry of '" + key +
                       "' has no 'fqn'");
        std::optional<StringRef> init = entry->getString("initializer");
        if (!init)
          continue; // Not in the graph (unused, or folded into a constant).
        // A non-persistent buffer (a rotary inv_freq, a causal mask) is in
        // no state dict, and nothing but BatchNorm's statistics (persistent)
        // is ever updated by a step: it is a constant of the model.
        if (kind == InitKind::Buffer &&
            entry->getBoolean("persistent") == std::optional<bool>(false))
          continue;
        InitInfo info;
        info.kind = kind;
        info.fqn = fqn->str();
        info.requiresGrad = entry->getBoolean("requires_grad").value_or(true);
        if (llvm::json::Array *aliases = entry->getArray("aliases"))
          for (llvm::json::Value &alias : *aliases)
            if (std::optional<StringRef> name = alias.getAsString())
              info.aliases.push_back(name->str());
        metadata.initializers[*init] = std::move(info);
      }
      return success();
    };
    if (failed(table("params", InitKind::Param)) ||
        failed(table("buffers", InitKind::Buffer)))
      return failure();
  }
  return success();
}

/// Whether `name` looks like a PyTorch state_dict FQN rather than a name the
/// exporter made up (`onnx::MatMul_123`, `/blocks.0/Constant_output_0`).
bool looksLikeFqn(StringRef name) {
  return !name.empty() && !name.starts_with("onnx::") && !name.starts_with("/") &&
         !name.contains(':') && !name.contains('/');
}

LogicalResult Importer::classify() {
  const onnx::GraphProto &graph = file.model.graph();
  bool haveMetadata = !metadata.json.empty();
  inits.resize(graph.initializer_size());
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto &tensor = graph.initializer(i);
    InitInfo &info = inits[i];
    if (convertedConstants.contains(tensor.name()))
      continue;
    if (haveMetadata) {
      auto known = metadata.initializers.find(tensor.name());
      if (known != metadata.initializers.end())
        info = known->second;
    } else if (looksLikeFqn(tensor.name())) {
      StringRef leaf = StringRef(tensor.name()).rsplit('.').second;
      bool isFloat = tensor.data_type() == onnx::TensorProto::FLOAT ||
                     tensor.data_type() == onnx::TensorProto::FLOAT16 ||
                     tensor.data_type() == onnx::TensorProto::BFLOAT16 ||
                     tensor.data_type() == onnx::TensorProto::DOUBLE;
      if (leaf == "running_mean" || leaf == "running_var" ||
          leaf == "num_batches_tracked")
        info.kind = InitKind::Buffer;
      else if (isFloat)
        info.kind = InitKind::Param;
      info.fqn = tensor.name();
    }
    // Without constant folding torch keeps computed constants in Constant
    // nodes; a floating-point matrix initializer it named `onnx::...` is a
    // folded (transposed, renamed) parameter.
    bool isFloatMatrix = tensor.dims_size() >= 2 &&
                         (tensor.data_type() == onnx::TensorProto::FLOAT ||
                          tensor.data_type() == onnx::TensorProto::FLOAT16 ||
                          tensor.data_type() == onnx::TensorProto::BFLOAT16 ||
                          tensor.data_type() == onnx::TensorProto::DOUBLE);
    if (info.kind == InitKind::Constant && !haveMetadata && isFloatMatrix &&
        StringRef(tensor.name()).starts_with("onnx::"))
      return error("initializer '" + tensor.name() +
                   "' looks like a parameter that the exporter renamed or "
                   "transformed (constant folding); re-export with "
                   "do_constant_folding=False and "
                   "training=torch.onnx.TrainingMode.TRAINING, as "
                   "fsdp_mlir.export does");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Types and values
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::convertElementType(int32_t onnxType, StringRef what) {
  Builder b(&context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return Type(b.getF32Type());
  case onnx::TensorProto::DOUBLE:
    return Type(b.getF64Type());
  case onnx::TensorProto::FLOAT16:
    return Type(b.getF16Type());
  case onnx::TensorProto::BFLOAT16:
    return Type(b.getBF16Type());
  case onnx::TensorProto::INT64:
    return Type(b.getI64Type());
  case onnx::TensorProto::INT32:
    return Type(b.getI32Type());
  case onnx::TensorProto::INT16:
    return Type(b.getI16Type());
  case onnx::TensorProto::INT8:
    return Type(b.getI8Type());
  case onnx::TensorProto::UINT8:
    return Type(b.getIntegerType(8, /*isSigned=*/false));
  case onnx::TensorProto::BOOL:
    return Type(b.getI1Type());
  default:
    break;
  }
  const std::string &name = onnx::TensorProto_DataType_Name(
      static_cast<onnx::TensorProto_DataType>(onnxType));
  return error(what + " has element type " + (name.empty() ? "?" : name) +
               ", which is not supported");
}

FailureOr<RankedTensorType>
Importer::convertTensorType(const onnx::TypeProto &type, StringRef what,
                            bool quiet) {
  if (quiet) {
    if (!type.has_tensor_type() || !type.tensor_type().has_shape() ||
        !llvm::all_of(type.tensor_type().shape().dim(),
                      [](const onnx::TensorShapeProto_Dimension &dim) {
                        return dim.has_dim_value() && dim.dim_value() >= 0;
                      }))
      return failure();
    ScopedDiagnosticHandler silence(&context, [](Diagnostic &) {
      return success();
    });
    return convertTensorType(type, what, /*quiet=*/false);
  }
  if (!type.has_tensor_type())
    return error(what + " is not a tensor");
  const onnx::TypeProto_Tensor &tensor = type.tensor_type();
  if (!tensor.has_shape())
    return error(what + " has no shape after ONNX shape inference");
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto_Dimension &dim : tensor.shape().dim()) {
    if (!dim.has_dim_value())
      return error(what + " has a dynamic dimension" +
                   (dim.has_dim_param() ? " '" + dim.dim_param() + "'" : "") +
                   " after shape inference; the compiler needs static "
                   "shapes, and this one depends on values known only at "
                   "run time");
    if (dim.dim_value() < 0)
      return error(what + " has a negative dimension " +
                   Twine(dim.dim_value()));
    shape.push_back(dim.dim_value());
  }
  FailureOr<Type> element = convertElementType(tensor.elem_type(), what);
  if (failed(element))
    return failure();
  // Every size the passes and the plan derive from a type assumes its
  // bytes fit in int64 (--batch-size=2^62 would otherwise wrap to a small
  // plan).
  auto result = RankedTensorType::get(shape, *element);
  if (element->isIntOrFloat() && !fsdpir::checkedByteSize(result)) {
    std::string text;
    llvm::raw_string_ostream(text) << result;
    return error(what + " is " + text + ", more bytes than int64 can count");
  }
  return result;
}

RankedTensorType initializerType(const onnx::TensorProto &tensor, Type element) {
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  return RankedTensorType::get(shape, element);
}



FailureOr<fsdpir::DataRefAttr> Importer::dataRef(int index) {
  const onnx::TensorProto &tensor = file.model.graph().initializer(index);
  const std::optional<Bytes> &ref = bytes[index];
  if (!ref)
    return error("initializer '" + tensor.name() +
                 "' keeps its values in typed fields, not raw bytes "
                 "(float_data, ...), so it cannot be referenced in place; "
                 "store it as raw_data (onnx.numpy_helper.from_array does)");
  return fsdpir::DataRefAttr::get(&context, ref->file, ref->offset, ref->length);
}

FailureOr<ElementsAttr>
Importer::tensorValue(const onnx::TensorProto &tensor,
                      const std::optional<EmbeddedBytes> &embedded,
                      StringRef what) {
  FailureOr<Type> element = convertElementType(tensor.data_type(), what);
  if (failed(element) ||
      failed(checkDims(tensor, [&] { return emitError(fileLoc) << what << ": "; })))
    return failure();
  RankedTensorType type = initializerType(tensor, *element);
  int64_t count = type.getNumElements();
  auto sized = [&](int64_t have) -> LogicalResult {
    if (have != count)
      return error(what + " holds " + Twine(have) + " values but its shape " +
                   "needs " + Twine(count));
    return success();
  };

  // Raw little-endian bytes: in the parsed proto, or in the mapped file.
  std::optional<StringRef> raw;
  if (tensor.has_raw_data())
    raw = tensor.raw_data();
  else if (embedded && embedded->stripped)
    raw = file.buffer->getBuffer().substr(embedded->offset, embedded->length);
  else if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return error(what + " is a constant stored as external data; only "
                        "parameters and buffers may live outside the model");
  if (raw) {
    if (element->isInteger(1)) {
      if (failed(sized(raw->size())))
        return failure();
      SmallVector<bool> values;
      for (char c : *raw)
        values.push_back(c != 0);
      return ElementsAttr(DenseElementsAttr::get(type, values));
    }
    int64_t width = fsdpir::elementBytes(*element);
    if (static_cast<int64_t>(raw->size()) % width != 0)
      return error(what + " holds " + Twine(raw->size()) +
                   " bytes, not a whole number of " + Twine(width) +
                   "-byte elements");
    if (failed(sized(static_cast<int64_t>(raw->size()) / width)))
      return failure();
    return ElementsAttr(DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(raw->data(), raw->size())));
  }
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (failed(sized(tensor.float_data_size())))
      return failure();
    return ElementsAttr(DenseElementsAttr::get(
        type, ArrayRef<float>(tensor.float_data().data(), count)));
  case onnx::TensorProto::DOUBLE:
    if (failed(sized(tensor.double_data_size())))
      return failure();
    return ElementsAttr(DenseElementsAttr::get(
        type, ArrayRef<double>(tensor.double_data().data(), count)));
  case onnx::TensorProto::INT64:
    if (failed(sized(tensor.int64_data_size())))
      return failure();
    return ElementsAttr(DenseElementsAttr::get(
        type, ArrayRef<int64_t>(tensor.int64_data().data(), count)));
  case onnx::TensorProto::INT32:
    if (failed(sized(tensor.int32_data_size())))
      return failure();
    return ElementsAttr(DenseElementsAttr::get(
        type, ArrayRef<int32_t>(tensor.int32_data().data(), count)));
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    // The spec stores 16-bit floats' bit patterns in int32_data.
    if (failed(sized(tensor.int32_data_size())))
      return failure();
    const llvm::fltSemantics &semantics =
        cast<FloatType>(*element).getFloatSemantics();
    SmallVector<APFloat> values;
    for (int32_t bits : tensor.int32_data())
      values.emplace_back(semantics, APInt(16, static_cast<uint16_t>(bits)));
    return ElementsAttr(DenseElementsAttr::get(type, values));
  }
  case onnx::TensorProto::BOOL: {
    if (failed(sized(tensor.int32_data_size())))
      return failure();
    SmallVector<bool> values(tensor.int32_data().begin(),
                             tensor.int32_data().end());
    return ElementsAttr(DenseElementsAttr::get(type, values));
  }
  default:
    return error(what + " stores its values in a form the importer does not "
                        "read; re-save it with raw_data");
  }
}

FailureOr<ElementsAttr> Importer::constantValue(int index) {
  const onnx::TensorProto &tensor = file.model.graph().initializer(index);
  return tensorValue(tensor, file.embedded[index],
                     "initializer '" + tensor.name() + "'");
}

//===----------------------------------------------------------------------===//
// Building the module
//===----------------------------------------------------------------------===//

LogicalResult Importer::declareState(ModuleOp module) {
  builder.setInsertionPointToEnd(module.getBody());
  const onnx::GraphProto &graph = file.model.graph();
  llvm::StringSet<> declared;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const InitInfo &info = inits[i];
    if (info.kind == InitKind::Constant)
      continue;
    const onnx::TensorProto &tensor = graph.initializer(i);
    std::string what = "initializer '" + tensor.name() + "'";
    FailureOr<Type> element = convertElementType(tensor.data_type(), what);
    if (failed(element))
      return failure();
    FailureOr<fsdpir::DataRefAttr> data = dataRef(i);
    if (failed(data))
      return failure();
    if (!declared.insert(info.fqn).second)
      return error("two initializers claim the name '" + info.fqn + "'");
    Location loc = NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc);
    RankedTensorType type = initializerType(tensor, *element);
    if (info.kind == InitKind::Param) {
      auto param = builder.create<fsdpir::ParamOp>(
          loc, builder.getStringAttr(info.fqn), TypeAttr::get(type),
          info.requiresGrad ? UnitAttr() : builder.getUnitAttr(), *data,
          ArrayAttr());
      if (!info.aliases.empty()) {
        SmallVector<StringRef> aliases(info.aliases.begin(), info.aliases.end());
        param.setAliasesAttr(builder.getStrArrayAttr(aliases));
      }
    } else {
      builder.create<fsdpir::BufferOp>(loc, builder.getStringAttr(info.fqn),
                                     TypeAttr::get(type), *data);
    }
  }
  return success();
}

FailureOr<Value> Importer::lookupValue(const std::string &name, Location loc) {
  if (name.empty()) {
    if (!noValue)
      noValue = builder.create<onnxir::NoValueOp>(fileLoc, builder.getNoneType());
    return noValue;
  }
  auto found = values.find(name);
  if (found != values.end())
    return found->second;
  auto init = initIndex.find(name);
  if (init == initIndex.end())
    return emitError(loc) << "input '" << name
                          << "' is produced by no earlier node, initializer or "
                             "graph input";
  int index = init->second;
  const InitInfo &info = inits[index];
  const onnx::TensorProto &tensor = file.model.graph().initializer(index);
  Location initLoc = NameLoc::get(builder.getStringAttr(name), fileLoc);
  Value value;
  if (info.kind == InitKind::Constant) {
    FailureOr<ElementsAttr> constant = constantValue(index);
    if (failed(constant))
      return failure();
    value = builder.create<onnxir::ConstantOp>(initLoc, *constant);
  } else {
    FailureOr<Type> element = convertElementType(tensor.data_type(), name);
    if (failed(element))
      return failure();
    RankedTensorType type = initializerType(tensor, *element);
    auto symbol = FlatSymbolRefAttr::get(&context, info.fqn);
    if (info.kind == InitKind::Param)
      value = builder.create<fsdpir::GetParamOp>(initLoc, type, symbol);
    else
      value = builder.create<fsdpir::GetBufferOp>(initLoc, type, symbol);
  }
  values[name] = value;
  return value;
}

FailureOr<Attribute>
Importer::convertAttribute(const onnx::AttributeProto &attr,
                           const onnx::NodeProto &node) {
  switch (attr.type()) {
  case onnx::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case onnx::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())));
  case onnx::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(
        SmallVector<float>(attr.floats().begin(), attr.floats().end())));
  case onnx::AttributeProto::STRINGS: {
    SmallVector<StringRef> strings(attr.strings().begin(),
                                   attr.strings().end());
    return Attribute(builder.getStrArrayAttr(strings));
  }
  case onnx::AttributeProto::TENSOR: {
    FailureOr<ElementsAttr> value =
        tensorValue(attr.t(), std::nullopt,
                    "attribute '" + attr.name() + "' of node '" + node.name() + "'");
    if (failed(value))
      return failure();
    return Attribute(*value);
  }
  default:
    return error("node '" + node.name() + "' (" + node.op_type() +
                 "): attribute '" + attr.name() + "' has a kind (" +
                 onnx::AttributeProto_AttributeType_Name(attr.type()) +
                 ") the importer does not support");
  }
}

/// Rewrites Constant's scalar and list forms (value_float, value_ints, ...)
/// into its `value` tensor form.
FailureOr<Attribute> constantFormValue(const onnx::AttributeProto &attr,
                                       Builder &b) {
  if (attr.name() == "value_float")
    return Attribute(DenseElementsAttr::get(
        RankedTensorType::get({}, b.getF32Type()), attr.f()));
  if (attr.name() == "value_int")
    return Attribute(DenseElementsAttr::get(
        RankedTensorType::get({}, b.getI64Type()), attr.i()));
  if (attr.name() == "value_floats")
    return Attribute(DenseElementsAttr::get(
        RankedTensorType::get({attr.floats_size()}, b.getF32Type()),
        ArrayRef<float>(attr.floats().data(), attr.floats_size())));
  if (attr.name() == "value_ints")
    return Attribute(DenseElementsAttr::get(
        RankedTensorType::get({attr.ints_size()}, b.getI64Type()),
        ArrayRef<int64_t>(attr.ints().data(), attr.ints_size())));
  return failure();
}

/// A node's inputs and outputs with omitted trailing optionals made explicit
/// (as empty names): ONNX lets a node leave them out, the onnx ops take them
/// all, as `none` where absent.
static std::pair<std::vector<std::string>, std::vector<std::string>>
nodeSignature(const onnx::NodeProto &node, int64_t opset) {
  std::vector<std::string> inputs(node.input().begin(), node.input().end());
  std::vector<std::string> outputs(node.output().begin(), node.output().end());
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(opset), node.domain());
  auto arity = [](const std::vector<onnx::OpSchema::FormalParameter> &formals,
                  size_t given) {
    if (formals.empty() ||
        formals.back().GetOption() == onnx::OpSchema::Variadic)
      return given;
    return std::max(given, formals.size());
  };
  if (schema) {
    inputs.resize(arity(schema->inputs(), inputs.size()));
    outputs.resize(arity(schema->outputs(), outputs.size()));
  }
  // BatchNormalization before opset 14 lists two more outputs (the saved
  // statistics of training); the onnx dialect's op has opset 14's three,
  // which is enough when those two are absent.
  if (node.op_type() == "BatchNormalization")
    while (outputs.size() > 3 && outputs.back().empty())
      outputs.pop_back();
  return {inputs, outputs};
}

FailureOr<Operation *>
Importer::createNodeOp(OpBuilder &b, const onnx::NodeProto &node,
                       ValueRange operands, ArrayRef<std::string> outputs) {
  std::string label = node.name().empty() ? node.op_type() : node.name();
  Location loc = nodeLoc(node);
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup("onnx." + node.op_type(), &context);
  // foldShapeComputations inlines every If whose condition it could fold.
  if (node.op_type() == "If" && node.domain().empty())
    return emitError(loc) << "node '" << label << "' (If): the condition '"
                          << (node.input_size() ? node.input(0) : "")
                          << "' is not a constant once the shapes are fixed; "
                             "an If is supported only then (its branch is "
                             "inlined at import)";
  if (node.op_type() == "NonZero" && node.domain().empty())
    return emitError(loc) << "node '" << label << "' (NonZero): its input '"
                          << (node.input_size() ? node.input(0) : "")
                          << "' is not a constant once the shapes are fixed; "
                             "NonZero is supported only then (folded at "
                             "import): the size of its result depends on the "
                             "data";
  if (!registered || node.op_type() == "NoValue")
    return emitError(loc) << "node '" << label << "': operator '"
                          << node.op_type() << "' of domain '"
                          << (node.domain().empty() ? "ai.onnx" : node.domain())
                          << "' is not supported; supported operators, in "
                          << onnxir::describeSupportedOps();

  OperationState state(loc, *registered);
  state.addOperands(operands);
  for (const std::string &output : outputs) {
    if (output.empty()) {
      state.types.push_back(b.getNoneType());
      continue;
    }
    auto type = valueTypes.find(output);
    if (type == valueTypes.end())
      return emitError(loc) << "node '" << label << "' (" << node.op_type()
                            << "): shape inference gave no type for output '"
                            << output << "'";
    FailureOr<RankedTensorType> converted =
        convertTensorType(type->second, "output '" + output + "' of node '" +
                                            label + "' (" + node.op_type() + ")");
    if (failed(converted))
      return failure();
    state.types.push_back(*converted);
  }

  ArrayRef<StringAttr> known = registered->getAttributeNames();
  for (const onnx::AttributeProto &attr : node.attribute()) {
    std::string name = attr.name();
    FailureOr<Attribute> value = failure();
    if (node.op_type() == "Constant" && name != "value") {
      value = constantFormValue(attr, b);
      name = "value";
      if (failed(value))
        return emitError(loc) << "node '" << label << "' (Constant): form '"
                              << attr.name() << "' is not supported";
    } else {
      if (!llvm::is_contained(known, b.getStringAttr(name)))
        return emitError(loc) << "node '" << label << "' (" << node.op_type()
                              << "): attribute '" << name
                              << "' is not supported";
      value = convertAttribute(attr, node);
      if (failed(value))
        return failure();
    }
    state.addAttribute(name, *value);
  }
  return b.create(state);
}

/// CastLike as the Cast it means: `to` is the element type shape inference
/// gave its output (the second input's), which the Cast op records.
static onnx::NodeProto asCast(const onnx::NodeProto &castLike,
                              const llvm::StringMap<onnx::TypeProto> &types) {
  onnx::NodeProto cast = castLike;
  cast.set_op_type("Cast");
  cast.clear_input();
  cast.add_input(castLike.input(0));
  cast.clear_attribute();
  auto output = types.find(castLike.output(0));
  onnx::AttributeProto *to = cast.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(output == types.end() ? 0
                                  : output->second.tensor_type().elem_type());
  return cast;
}

LogicalResult Importer::buildNode(const onnx::NodeProto &given) {
  Location loc = nodeLoc(given);
  std::optional<onnx::NodeProto> cast;
  if (given.op_type() == "CastLike" && given.input_size() == 2 &&
      given.output_size() == 1)
    cast = asCast(given, valueTypes);
  const onnx::NodeProto &node = cast ? *cast : given;
  auto [inputs, outputs] = nodeSignature(node, opset);
  SmallVector<Value> operands;
  for (const std::string &input : inputs) {
    FailureOr<Value> value = lookupValue(input, loc);
    if (failed(value))
      return failure();
    operands.push_back(*value);
  }
  FailureOr<Operation *> op = createNodeOp(builder, node, operands, outputs);
  if (failed(op))
    return failure();
  for (auto [output, result] : llvm::zip(outputs, (*op)->getResults()))
    if (!output.empty())
      values[output] = result;
  return success();
}

/// The ONNX tensor holding `value` (a small folded constant).
static std::optional<onnx::TensorProto> toTensorProto(DenseElementsAttr value) {
  onnx::TensorProto tensor;
  Type element = value.getElementType();
  if (element.isF32())
    tensor.set_data_type(onnx::TensorProto::FLOAT);
  else if (element.isF64())
    tensor.set_data_type(onnx::TensorProto::DOUBLE);
  else if (element.isF16())
    tensor.set_data_type(onnx::TensorProto::FLOAT16);
  else if (element.isBF16())
    tensor.set_data_type(onnx::TensorProto::BFLOAT16);
  else if (element.isInteger(64))
    tensor.set_data_type(onnx::TensorProto::INT64);
  else if (element.isInteger(32))
    tensor.set_data_type(onnx::TensorProto::INT32);
  else if (element.isInteger(1))
    tensor.set_data_type(onnx::TensorProto::BOOL);
  else
    return std::nullopt;
  for (int64_t dim : value.getType().getShape())
    tensor.add_dims(dim);
  std::string raw;
  if (element.isInteger(1)) {
    for (bool b : value.getValues<bool>())
      raw.push_back(b ? 1 : 0);
  } else {
    ArrayRef<char> data = value.getRawData();
    int64_t copies = value.isSplat() ? value.getNumElements() : 1;
    for (int64_t i = 0; i < copies; ++i)
      raw.append(data.data(), data.size());
  }
  tensor.set_raw_data(raw);
  return tensor;
}

/// ONNX's shape inference leaves OneHot's new dimension unknown even when
/// its depth is a constant; this writes the depth into the output's
/// inferred type, which the next round of inference keeps and carries on.
/// True when it wrote something.
static bool
pinOneHotDepth(onnx::GraphProto &graph, const onnx::NodeProto &node,
               const llvm::StringMap<DenseElementsAttr> &constants) {
  if (node.input_size() < 2 || node.output_size() < 1)
    return false;
  auto depth = constants.find(node.input(1));
  if (depth == constants.end() || depth->second.getNumElements() != 1)
    return false;
  int64_t value;
  Type element = depth->second.getElementType();
  if (isa<IntegerType>(element))
    value = (*depth->second.getValues<APInt>().begin()).getSExtValue();
  else if (isa<FloatType>(element))
    value = static_cast<int64_t>(
        (*depth->second.getValues<APFloat>().begin()).convertToDouble());
  else
    return false;
  if (value < 1)
    return false;
  int64_t axis = -1;
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == "axis")
      axis = attr.i();
  for (auto *list : {graph.mutable_value_info(), graph.mutable_output()})
    for (onnx::ValueInfoProto &info : *list) {
      if (info.name() != node.output(0) ||
          !info.type().tensor_type().has_shape())
        continue;
      onnx::TensorShapeProto *shape =
          info.mutable_type()->mutable_tensor_type()->mutable_shape();
      int64_t at = axis < 0 ? axis + shape->dim_size() : axis;
      if (at < 0 || at >= shape->dim_size() || shape->dim(at).has_dim_value())
        return false;
      shape->mutable_dim(at)->set_dim_value(value);
      return true;
    }
  return false;
}

/// ONNX 1.12's shape inference gives an Einsum's result its rank but not
/// its dimensions (an Einsum inside a model, as MaxViT's attention, then
/// leaves every later shape unknown). With the inputs' shapes static this
/// writes the result's dimensions, each letter's size from the input that
/// carries it, into the inferred type, which the next round of inference
/// carries on. The equation reads as the lowering reads it
/// (onnxir::einsumTerms: spaces ignored, an implicit output in ASCII
/// order, an ellipsis as letters of its own; a size-1 dim broadcasts).
/// Anything else (a term whose length is not its input's rank, sizes that
/// disagree) is left for the lowering to refuse, naming the equation. True
/// when it wrote something.
static bool pinEinsumShape(onnx::GraphProto &graph, const onnx::NodeProto &node,
                           const llvm::StringMap<onnx::TypeProto> &types) {
  if (node.output_size() != 1)
    return false;
  auto equation = llvm::find_if(node.attribute(), [](const auto &attr) {
    return attr.name() == "equation";
  });
  if (equation == node.attribute().end())
    return false;
  SmallVector<SmallVector<int64_t>> shapes;
  SmallVector<int64_t> ranks;
  for (int index = 0; index < node.input_size(); ++index) {
    SmallVector<int64_t> &dims = shapes.emplace_back();
    auto type = types.find(node.input(index));
    if (type != types.end() && type->second.tensor_type().has_shape()) {
      for (const auto &dim : type->second.tensor_type().shape().dim()) {
        if (!dim.has_dim_value())
          return false;
        dims.push_back(dim.dim_value());
      }
    } else {
      auto init = llvm::find_if(graph.initializer(), [&](const auto &t) {
        return t.name() == node.input(index);
      });
      if (init == graph.initializer().end())
        return false;
      dims.assign(init->dims().begin(), init->dims().end());
    }
    ranks.push_back(dims.size());
  }
  FailureOr<onnxir::EinsumTerms> terms =
      onnxir::einsumTerms(equation->s(), ranks);
  if (failed(terms) ||
      static_cast<int>(terms->inputs.size()) != node.input_size())
    return false;
  // A letter of size 1 in one input broadcasts to its size in another.
  std::map<char, int64_t> sizes;
  for (auto [term, dims] : llvm::zip(terms->inputs, shapes)) {
    if (dims.size() != term.size())
      return false;
    for (auto [letter, size] : llvm::zip(term, dims)) {
      auto [it, fresh] = sizes.try_emplace(letter, size);
      if (!fresh && it->second != size && size != 1 && it->second != 1)
        return false;
      it->second = fresh || it->second == 1 ? size : it->second;
    }
  }
  const std::string &output = terms->output;
  for (auto *list : {graph.mutable_value_info(), graph.mutable_output()})
    for (onnx::ValueInfoProto &info : *list) {
      if (info.name() != node.output(0) ||
          !info.type().tensor_type().has_shape())
        continue;
      onnx::TensorShapeProto *shape =
          info.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() != static_cast<int>(output.size()))
        return false;
      bool changed = false;
      for (auto [d, letter] : llvm::enumerate(output)) {
        auto size = sizes.find(letter);
        if (size == sizes.end())
          return false;
        onnx::TensorShapeProto_Dimension *dim = shape->mutable_dim(d);
        if (dim->has_dim_value())
          continue;
        dim->set_dim_value(size->second);
        changed = true;
      }
      return changed;
    }
  return false;
}

/// Turns `node` into a Constant node of `value`; false (leaving it) when
/// `value` has no ONNX tensor form.
static bool replaceByConstant(onnx::NodeProto &node, DenseElementsAttr value) {
  std::optional<onnx::TensorProto> tensor = toTensorProto(value);
  if (!tensor)
    return false;
  ::fsdp::onnx_import::makeConstant(node, std::move(*tensor));
  return true;
}

/// ONNX's shape inference propagates values only through a few operators
/// (Shape, Gather, Concat, ...), so torch's shape chains that pass through
/// others (Range, Where, ConstantOfShape, ...) leave later shapes unknown.
/// This loop alternates inference with folding: every node whose inputs are
/// now constant (or, for Shape and Size, statically shaped) is evaluated by
/// the onnx ops' own folders and replaced by a Constant node, which the next
/// round of inference reads. It stops when a round folds nothing.
LogicalResult Importer::foldShapeComputations() {
  static const llvm::StringSet<> foldable = {
      "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast",
      "Slice", "Range", "Add", "Sub", "Mul", "Div", "Equal", "Where", "Reshape",
      "ConstantOfShape", "Constant", "Mod", "Neg", "Transpose",
      // Hugging Face's attention masks: shape-only, so constant here.
      "Expand", "GatherND", "CumSum", "Not", "Max", "Min", "And", "Or", "Less",
      "LessOrEqual", "Greater", "GreaterOrEqual",
      // Index tables built in forward (BEiT's relative positions: index_put
      // as ScatterND, then a sum; Whisper's positions tiled over the batch;
      // DINOv2's sqrt of the patch count as a power).
      "Tile", "ScatterND", "ReduceSum", "Flatten", "Pow",
      // torch 2.x's exported attention: the square root of its scale.
      "Sqrt",
      // Sizes rounded with math.ceil / math.floor (MobileViT's padding).
      "Ceil", "Floor"};
  onnx::GraphProto *graph = file.model.mutable_graph();
  llvm::StringMap<DenseElementsAttr> constants;
  for (int i = 0; i < graph->initializer_size(); ++i) {
    const onnx::TensorProto &tensor = graph->initializer(i);
    if (inits[i].kind != InitKind::Constant ||
        tensor.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    FailureOr<ElementsAttr> value = constantValue(i);
    if (failed(value))
      return failure();
    if (auto dense = dyn_cast<DenseElementsAttr>(*value))
      constants[tensor.name()] = dense;
  }

  OwningOpRef<ModuleOp> scratch = ModuleOp::create(fileLoc);
  OpBuilder b(&context);
  // Each round that changes anything turns at least one node into a
  // Constant or replaces an If by its branch's nodes, so the node count
  // (grown by what the branches add) bounds the rounds.
  for (int round = 0, rounds = graph->node_size() + 1; round < rounds;
       ++round) {
    if (failed(infer()))
      return failure();
    bool changed = false;
    for (onnx::NodeProto &node : *graph->mutable_node()) {
      if (node.op_type() == "OneHot" && pinOneHotDepth(*graph, node, constants))
        changed = true;
      if (node.op_type() == "Einsum" &&
          pinEinsumShape(*graph, node, valueTypes))
        changed = true;
      // NonZero's result size is the data's, so its type is never static:
      // it is evaluated here, not through an op.
      if (node.op_type() == "NonZero" && node.input_size() == 1 &&
          node.output_size() == 1 && !constants.count(node.output(0))) {
        auto input = constants.find(node.input(0));
        DenseElementsAttr result;
        if (input != constants.end())
          result = onnxir::nonZeroIndices(input->second);
        if (result && replaceByConstant(node, result)) {
          constants[node.output(0)] = result;
          changed = true;
        }
        continue;
      }
      if (!foldable.contains(node.op_type()) || node.output_size() != 1 ||
          constants.count(node.output(0)))
        continue;
      auto [inputs, outputs] = nodeSignature(node, opset);
      if (outputs.size() != 1)
        continue;
      auto resultType = valueTypes.find(outputs[0]);
      if (resultType == valueTypes.end())
        continue;
      FailureOr<RankedTensorType> staticResult =
          convertTensorType(resultType->second, outputs[0], /*quiet=*/true);
      // Shape computations are small; a large constant (a ConstantOfShape
      // mask, say) stays an op rather than being materialised here.
      if (failed(staticResult) ||
          staticResult->getNumElements() >
              (isa<FloatType>(staticResult->getElementType())
                   ? kMaxFoldedElements
                   : kMaxFoldedIndices))
        continue;

      b.setInsertionPointToEnd(scratch->getBody());
      SmallVector<Value> operands;
      bool ready = true;
      for (auto [index, input] : llvm::enumerate(inputs)) {
        if (input.empty()) {
          operands.push_back(b.create<onnxir::NoValueOp>(fileLoc, b.getNoneType()));
          continue;
        }
        auto constant = constants.find(input);
        if (constant != constants.end()) {
          operands.push_back(b.create<onnxir::ConstantOp>(fileLoc, constant->second));
          continue;
        }
        // Shape and Size need only their input's (static) type.
        auto type = valueTypes.find(input);
        FailureOr<RankedTensorType> staticType =
            type == valueTypes.end()
                ? FailureOr<RankedTensorType>(failure())
                : convertTensorType(type->second, input, /*quiet=*/true);
        if ((node.op_type() != "Shape" && node.op_type() != "Size") ||
            index != 0 || failed(staticType)) {
          ready = false;
          break;
        }
        operands.push_back(
            b.create<onnxir::ConstantOp>(fileLoc, DenseElementsAttr::get(
                *staticType, b.getZeroAttr(staticType->getElementType()))));
      }
      if (!ready) {
        scratch->getBody()->clear();
        continue;
      }
      FailureOr<Operation *> op = createNodeOp(b, node, operands, outputs);
      if (failed(op))
        return failure();
      SmallVector<Attribute> operandValues;
      for (Value operand : operands) {
        Attribute value;
        if (auto constant = operand.getDefiningOp<onnxir::ConstantOp>();
            constant && (node.op_type() != "Shape" && node.op_type() != "Size"))
          value = constant.getValue();
        operandValues.push_back(value);
      }
      SmallVector<OpFoldResult> folded;
      DenseElementsAttr result;
      if (succeeded((*op)->fold(operandValues, folded)) && folded.size() == 1) {
        if (auto attr = dyn_cast_if_present<Attribute>(folded[0]))
          result = dyn_cast<DenseElementsAttr>(attr);
        else if (auto value = dyn_cast_if_present<Value>(folded[0]))
          if (auto constant = value.getDefiningOp<onnxir::ConstantOp>())
            result = dyn_cast<DenseElementsAttr>(constant.getValue());
      }
      scratch->getBody()->clear();
      if (!result || !replaceByConstant(node, result))
        continue;
      constants[outputs[0]] = result;
      changed = true;
    }
    FailureOr<int> added = inlineConstantIfs(constants);
    if (failed(added))
      return failure();
    FailureOr<int> resolved = ::fsdp::onnx_import::resolveSequences(
        *graph, constants, valueTypes,
        [&](const onnx::NodeProto &node) { return nodeLoc(node); });
    if (failed(resolved))
      return failure();
    if (!changed && *added < 0 && *resolved < 0)
      return success();
    rounds += std::max(*added, 0) + std::max(*resolved, 0);
  }
  return error("folding shape computations did not converge");
}

/// Replaces every `If` whose condition is now a constant by the nodes of the
/// branch it takes, then an Identity from each branch output to the If's
/// output. torch's exporter writes such Ifs for checks decided by shapes
/// (Hugging Face's and torchvision's), which are constant once the batch
/// size is fixed. The ONNX checker holds names unique across subgraphs, so
/// the branch's nodes keep theirs; its initializers become Constant nodes.
/// Returns how many nodes it added, or -1 when there was none to inline.
FailureOr<int> Importer::inlineConstantIfs(
    const llvm::StringMap<DenseElementsAttr> &constants) {
  onnx::GraphProto *graph = file.model.mutable_graph();
  auto constantCondition = [&](const onnx::NodeProto &node) {
    return node.op_type() == "If" && node.input_size() == 1
               ? constants.find(node.input(0))
               : constants.end();
  };
  // Every folding round asks; most graphs have no If to inline.
  if (llvm::none_of(graph->node(), [&](const onnx::NodeProto &node) {
        return constantCondition(node) != constants.end();
      }))
    return -1;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  int added = 0;
  for (onnx::NodeProto &node : *graph->mutable_node()) {
    auto cond = constantCondition(node);
    if (cond == constants.end()) {
      *nodes.Add() = std::move(node);
      continue;
    }
    std::string label = node.name().empty() ? "If" : node.name();
    DenseElementsAttr value = cond->second;
    if (!value.getElementType().isInteger(1) || value.getNumElements() != 1)
      return emitError(nodeLoc(node))
             << "node '" << label << "' (If): the condition '" << node.input(0)
             << "' must be one bool, not " << value.getType();
    bool taken = *value.value_begin<bool>();
    StringRef branchName = taken ? "then_branch" : "else_branch";
    const onnx::GraphProto *branch = nullptr;
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == branchName && attr.has_g())
        branch = &attr.g();
    if (!branch || branch->output_size() != node.output_size())
      return emitError(nodeLoc(node))
             << "node '" << label << "' (If): its " << branchName
             << " must be a graph with " << node.output_size() << " outputs";
    for (const onnx::TensorProto &init : branch->initializer()) {
      onnx::NodeProto *constant = nodes.Add();
      constant->set_op_type("Constant");
      constant->set_name(label + "/" + init.name());
      constant->add_output(init.name());
      onnx::AttributeProto *attr = constant->add_attribute();
      attr->set_name("value");
      attr->set_type(onnx::AttributeProto::TENSOR);
      *attr->mutable_t() = init;
      ++added;
    }
    for (const onnx::NodeProto &inner : branch->node()) {
      *nodes.Add() = inner;
      ++added;
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty())
        continue;
      onnx::NodeProto *identity = nodes.Add();
      identity->set_op_type("Identity");
      identity->set_name(label + "/" + branchName.str() + "/output_" +
                         std::to_string(i));
      identity->add_input(branch->output(i).name());
      identity->add_output(node.output(i));
      ++added;
    }
  }
  graph->mutable_node()->Swap(&nodes);
  return added;
}

LogicalResult Importer::buildForward(ModuleOp module) {
  const onnx::GraphProto &graph = file.model.graph();
  SmallVector<Type> inputTypes, outputTypes;
  SmallVector<std::string> inputNames;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initIndex.count(input.name()))
      continue;
    FailureOr<RankedTensorType> type =
        convertTensorType(input.type(), "graph input '" + input.name() + "'");
    if (failed(type))
      return failure();
    inputTypes.push_back(*type);
    inputNames.push_back(input.name());
  }
  // Result types are set once the body exists: they are the types of the
  // values the nodes produce, so an unsupported shape names its node.
  builder.setInsertionPointToEnd(module.getBody());
  auto forward = builder.create<func::FuncOp>(
      fileLoc, "forward", builder.getFunctionType(inputTypes, {}));
  for (auto [index, name] : llvm::enumerate(inputNames))
    forward.setArgAttr(index, FSDPDialect::NameAttrHelper::getNameStr(),
                       builder.getStringAttr(name));
  Block *entry = forward.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [name, arg] : llvm::zip(inputNames, entry->getArguments()))
    values[name] = arg;

  std::string why;
  if (const onnx::NodeProto *node =
          ::fsdp::onnx_import::unresolvedSequence(graph, why))
    return emitError(nodeLoc(*node))
           << "node '"
           << (node->name().empty() ? node->op_type() : node->name()) << "' ("
           << node->op_type()
           << "): a sequence is supported only when its tensors and positions "
              "are known at import (it is then resolved into its tensors); "
           << why;
  for (const onnx::NodeProto &node : graph.node())
    if (failed(buildNode(node)))
      return failure();

  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    if (!values.count(output.name()) && !initIndex.count(output.name()))
      return error("graph output '" + output.name() +
                   "' is produced by no node, initializer or graph input");
    FailureOr<Value> value = lookupValue(output.name(), fileLoc);
    if (failed(value))
      return failure();
    results.push_back(*value);
    outputTypes.push_back(value->getType());
  }
  builder.create<func::ReturnOp>(fileLoc, results);
  forward.setFunctionType(builder.getFunctionType(inputTypes, outputTypes));
  for (auto [index, output] : llvm::enumerate(graph.output()))
    forward.setResultAttr(index, FSDPDialect::NameAttrHelper::getNameStr(),
                          builder.getStringAttr(output.name()));
  return success();
}

/// A constant's integer values (integer or floating point elements), if
/// `value` is an onnx.Constant.
static std::optional<SmallVector<int64_t>> constantIntegers(Value value) {
  auto constant = value.getDefiningOp<onnxir::ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements)
    return std::nullopt;
  SmallVector<int64_t> ints;
  if (isa<IntegerType>(elements.getElementType()))
    for (const APInt &v : elements.getValues<APInt>())
      ints.push_back(v.getSExtValue());
  else if (isa<FloatType>(elements.getElementType()))
    for (const APFloat &v : elements.getValues<APFloat>())
      ints.push_back(static_cast<int64_t>(v.convertToDouble()));
  else
    return std::nullopt;
  return ints;
}

/// `value` viewed as `shape` (an onnx.Reshape by a constant shape), built
/// at `b`'s insertion point.
static Value reshapeTo(OpBuilder &b, Location loc, Value value,
                       ArrayRef<int64_t> shape) {
  auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                         b.getI64Type());
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  return b.create<onnxir::ReshapeOp>(
      loc, RankedTensorType::get(shape, element), value,
      b.create<onnxir::ConstantOp>(loc,
                                   DenseElementsAttr::get(shapeType, shape)),
      b.getI64IntegerAttr(0));
}

/// OneHot has no kernel: it becomes
///   Where(Or(Equal(u, ids), Equal(u, ids - depth)), values[1], values[0])
/// with u the indices unsqueezed at `axis` and ids the constant 0..depth-1
/// along that axis (so a negative index counts from depth, and one out of
/// range selects values[0] everywhere, as ONNX says). Those ops have kernels
/// and rules, so a gradient reaches `values`.
static LogicalResult expandOneHot(onnxir::OneHotOp op) {
  using namespace onnxir;
  Location loc = op.getLoc();
  auto indicesType = dyn_cast<RankedTensorType>(op.getIndices().getType());
  auto valuesType = dyn_cast<RankedTensorType>(op.getValues().getType());
  auto outType = dyn_cast<RankedTensorType>(op.getOutput().getType());
  std::optional<SmallVector<int64_t>> depth = constantIntegers(op.getDepth());
  if (!depth || depth->size() != 1 || (*depth)[0] < 1)
    return op.emitError("OneHot's depth must be a positive constant");
  // The ids below are a constant table of depth elements.
  if ((*depth)[0] > kMaxFoldedIndices)
    return op.emitError("OneHot's depth ")
           << (*depth)[0] << " is larger than the " << kMaxFoldedIndices
           << " classes the compiler takes (its class ids are a constant "
              "table)";
  if (!indicesType || !valuesType || valuesType.getRank() != 1 ||
      valuesType.getDimSize(0) != 2 || !outType ||
      !indicesType.hasStaticShape())
    return op.emitError("OneHot needs statically shaped indices and two "
                        "values [off, on]");
  int64_t rank = indicesType.getRank() + 1;
  int64_t given = static_cast<int64_t>(op.getAxis());
  int64_t axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis >= rank)
    return op.emitError("OneHot's axis ")
           << given << " is out of range for rank " << rank;

  OpBuilder b(op);
  Type i64 = b.getI64Type();
  auto ints = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> values) -> Value {
    auto type = RankedTensorType::get(shape, i64);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, values));
  };
  Value indices = op.getIndices();
  if (!indicesType.getElementType().isInteger(64))
    indices = b.create<CastOp>(
        loc, RankedTensorType::get(indicesType.getShape(), i64), indices,
        b.getI64IntegerAttr(onnx::TensorProto::INT64));
  SmallVector<int64_t> unsqueezed(indicesType.getShape());
  unsqueezed.insert(unsqueezed.begin() + axis, 1);
  Value u = b.create<UnsqueezeOp>(loc, RankedTensorType::get(unsqueezed, i64),
                                  indices, ints({1}, {axis}));
  SmallVector<int64_t> idsShape(rank, 1), outShape(indicesType.getShape());
  idsShape[axis] = (*depth)[0];
  outShape.insert(outShape.begin() + axis, (*depth)[0]);
  SmallVector<int64_t> ids, negative;
  for (int64_t i = 0; i < (*depth)[0]; ++i) {
    ids.push_back(i);
    negative.push_back(i - (*depth)[0]);
  }
  auto hitType = RankedTensorType::get(outShape, b.getI1Type());
  Value hit = b.create<OrOp>(
      loc, hitType, b.create<EqualOp>(loc, hitType, u, ints(idsShape, ids)),
      b.create<EqualOp>(loc, hitType, u, ints(idsShape, negative)));
  auto pick = [&](int64_t index) -> Value {
    return b.create<GatherOp>(
        loc, RankedTensorType::get({}, valuesType.getElementType()),
        op.getValues(), ints({}, {index}), b.getI64IntegerAttr(0));
  };
  auto type = RankedTensorType::get(outShape, valuesType.getElementType());
  if (type != outType)
    return op.emitError("OneHot's result is ")
           << outType << ", but its indices, depth and values give " << type;
  Value result = b.create<WhereOp>(loc, type, hit, pick(1), pick(0));
  op.getOutput().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// EyeLike depends only on its input's static shape and its attributes, so
/// it becomes the constant it is: ones where column - row = k. Its element
/// type is the result's (shape inference applied `dtype`).
static LogicalResult expandEyeLike(onnxir::EyeLikeOp op) {
  auto outType = dyn_cast<RankedTensorType>(op.getOutput().getType());
  if (!outType || !outType.hasStaticShape() || outType.getRank() != 2)
    return op.emitError("EyeLike needs a 2-D input of static shape, got ")
           << op.getInput().getType();
  Type element = outType.getElementType();
  auto floatType = dyn_cast<FloatType>(element);
  if (!floatType && !isa<IntegerType>(element))
    return op.emitError("EyeLike's element type ")
           << element << " is not a number type";
  int64_t rows = outType.getDimSize(0), columns = outType.getDimSize(1);
  std::optional<int64_t> elements = llvm::checkedMul(rows, columns);
  if (!elements || *elements > kMaxRewriteConstant)
    return op.emitError("EyeLike's ")
           << rows << " x " << columns << " result is larger than the "
           << kMaxRewriteConstant << " elements a constant made at import "
           << "may have";
  int64_t k = op.getK();
  // Row r's one is at column r + k, written so that no k overflows.
  auto hasOne = [&](int64_t r) { return k >= -r && k < columns - r; };
  DenseElementsAttr value;
  if (floatType) {
    const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
    SmallVector<APFloat> values(rows * columns, APFloat::getZero(semantics));
    for (int64_t r = 0; r < rows; ++r)
      if (hasOne(r))
        values[r * columns + r + k] = APFloat::getOne(semantics);
    value = DenseElementsAttr::get(outType, values);
  } else {
    unsigned width = element.getIntOrFloatBitWidth();
    SmallVector<APInt> values(rows * columns, APInt(width, 0));
    for (int64_t r = 0; r < rows; ++r)
      if (hasOne(r))
        values[r * columns + r + k] = APInt(width, 1);
    value = DenseElementsAttr::get(outType, values);
  }
  OpBuilder b(op);
  op.getOutput().replaceAllUsesWith(
      b.create<onnxir::ConstantOp>(op.getLoc(), value).getResult());
  op.erase();
  return success();
}

/// A constant of float `type` whose element i is value(i), rounded to
/// nearest even, made from raw bytes: 2 to 8 bytes an element where an
/// APFloat or an Attribute per element would take 32 or more.
static DenseElementsAttr floatElements(RankedTensorType type,
                                       function_ref<double(int64_t)> value) {
  const llvm::fltSemantics &semantics =
      cast<FloatType>(type.getElementType()).getFloatSemantics();
  size_t bytes = type.getElementTypeBitWidth() / 8;
  int64_t count = type.getNumElements();
  std::vector<char> raw(count * bytes);
  for (int64_t i = 0; i < count; ++i) {
    APFloat element(value(i));
    bool lost;
    element.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
    llvm::StoreIntToMemory(element.bitcastToAPInt(),
                           reinterpret_cast<uint8_t *>(&raw[i * bytes]), bytes);
  }
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

/// Range over values known only at run time has no kernel, but when its
/// length n is static (declared on the graph, or inferred) it is
///   start + iota * delta
/// with iota the constant 0..n-1, in ops with kernels (integer arithmetic
/// runs in int64, so a narrower integer Range is cast there and back). The
/// plan's length is that static n: it cannot check as it runs that
/// ceil((limit - start) / delta) agrees, and limit is not read. A Range of
/// constants is left to its folder.
static LogicalResult expandRange(onnxir::RangeOp op) {
  using namespace onnxir;
  auto outType = dyn_cast<RankedTensorType>(op.getOutput().getType());
  auto isConstant = [](Value v) { return v.getDefiningOp<ConstantOp>(); };
  if (isConstant(op.getStart()) && isConstant(op.getLimit()) &&
      isConstant(op.getDelta()))
    return success();
  if (!outType || !outType.hasStaticShape() || outType.getRank() != 1)
    return op.emitError("Range over values known only at run time needs a "
                        "static length (declare the output's shape), got ")
           << op.getOutput().getType();
  Type element = outType.getElementType();
  auto integer = dyn_cast<IntegerType>(element);
  if (!integer && !isa<FloatType>(element))
    return op.emitError("Range's element type ")
           << element << " is not a number type";
  int64_t n = outType.getDimSize(0);
  if (n > kMaxFoldedIndices)
    return op.emitError("Range's length ")
           << n << " is over the " << kMaxFoldedIndices
           << " the compiler takes (its 0..n-1 is a constant)";
  OpBuilder b(op);
  Location loc = op.getLoc();
  bool widen = integer && integer.getWidth() != 64;
  Type computed = widen ? b.getI64Type() : element;
  auto scalarType = RankedTensorType::get({}, computed);
  auto vectorType = RankedTensorType::get({n}, computed);
  auto castTo = [&](Value v, RankedTensorType type, int64_t to) -> Value {
    return b.create<CastOp>(loc, type, v, b.getI64IntegerAttr(to));
  };
  Value start = op.getStart(), delta = op.getDelta();
  if (widen) {
    start = castTo(start, scalarType, onnx::TensorProto::INT64);
    delta = castTo(delta, scalarType, onnx::TensorProto::INT64);
  }
  DenseElementsAttr iota;
  if (integer) {
    SmallVector<int64_t> values = llvm::to_vector(llvm::seq<int64_t>(0, n));
    iota = DenseElementsAttr::get(vectorType, ArrayRef<int64_t>(values));
  } else {
    iota = floatElements(vectorType,
                         [](int64_t i) { return static_cast<double>(i); });
  }
  Value steps =
      b.create<MulOp>(loc, vectorType, b.create<ConstantOp>(loc, iota), delta);
  Value result = b.create<AddOp>(loc, vectorType, start, steps);
  if (widen)
    result = castTo(result, outType,
                    integer.getWidth() == 32   ? onnx::TensorProto::INT32
                    : integer.getWidth() == 16 ? onnx::TensorProto::INT16
                                               : onnx::TensorProto::INT8);
  op.getOutput().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// GatherND has no kernel. Each index tuple (of length k) picks a slice of
/// `data` after its first b = batch_dims axes, which is one row of `data`
/// flattened into [B * R, rest...] (B the batch axes' size, R the k indexed
/// axes'): row batch * R + the tuple's row among R (buildTupleRows, a
/// constant for constant indices, as torch 2.x's `x[-2]` in Falcon's
/// query/key/value split, else integer ops over the index columns). So it
/// becomes a Gather along axis 0 of that flattening, whose kernel and
/// gradient exist. Without batch axes, tuples of length 1 known only at run
/// time (a Mixture-of-Experts layer's `w[expert_ids]`) are that Gather's
/// indices directly, its kernel checking their range; other run-time
/// indices are checked by buildTupleRows' Gathers. Constant indices out of
/// range name the node.
static LogicalResult expandGatherND(onnxir::GatherNDOp op) {
  using namespace onnxir;
  auto dataType = dyn_cast<RankedTensorType>(op.getData().getType());
  auto indexType = dyn_cast<RankedTensorType>(op.getIndices().getType());
  int64_t batch = op.getBatchDims();
  if (op.getData().getDefiningOp<ConstantOp>() &&
      op.getIndices().getDefiningOp<ConstantOp>())
    return success(); // Its folder's.
  if (!dataType || !indexType || !indexType.hasStaticShape() ||
      indexType.getRank() < 1)
    return op.emitError("GatherND needs ranked data and indices of static "
                        "shape, got ")
           << op.getData().getType() << " and " << op.getIndices().getType();
  int64_t k = indexType.getShape().back();
  ArrayRef<int64_t> shape = dataType.getShape();
  if (batch < 0 || k < 1 || batch + k > dataType.getRank() ||
      batch >= indexType.getRank())
    return op.emitError("GatherND's tuples of length ")
           << k << " after " << batch << " batch axes do not fit data "
           << dataType;
  OpBuilder b(op);
  Location loc = op.getLoc();
  std::optional<SmallVector<int64_t>> indices =
      constantIntegers(op.getIndices());
  if (!indices && batch == 0 && k == 1) {
    Value rows =
        reshapeTo(b, loc, op.getIndices(), indexType.getShape().drop_back());
    Value result = b.create<GatherOp>(loc, op.getType(), op.getData(), rows,
                                      b.getI64IntegerAttr(0));
    op.getOutput().replaceAllUsesWith(result);
    op.erase();
    return success();
  }
  ArrayRef<int64_t> indexed = shape.slice(batch, k);
  if (llvm::any_of(shape.take_front(batch + k), ShapedType::isDynamic))
    return op.emitError("GatherND needs static batch and indexed axes, got ")
           << dataType;
  for (size_t t = 0; indices && t < indices->size(); t += k)
    for (int64_t d = 0; d < k; ++d) {
      int64_t index = (*indices)[t + d];
      if (index < -indexed[d] || index >= indexed[d])
        return op.emitError("GatherND's index ")
               << index << " is out of range for axis " << batch + d
               << " of size " << indexed[d];
    }

  std::optional<int64_t> rowsPerBatch = 1, batches = 1, total;
  for (int64_t size : indexed)
    rowsPerBatch =
        rowsPerBatch ? llvm::checkedMul(*rowsPerBatch, size) : rowsPerBatch;
  for (int64_t size : shape.take_front(batch))
    batches = batches ? llvm::checkedMul(*batches, size) : batches;
  if (rowsPerBatch && batches)
    total = llvm::checkedMul(*rowsPerBatch, *batches);
  // The batches' row offsets are a constant of `batches` elements.
  if (!total || *batches > kMaxRewriteConstant)
    return op.emitError("GatherND's data ")
           << dataType << " has more rows over its " << batch
           << " batch axes than the importer's rewrite holds (its row "
           << "offsets are a constant of at most " << kMaxRewriteConstant
           << " elements)";
  Value rows = buildTupleRows(b, loc, op.getIndices(), indexed);
  if (batch) {
    // Each batch's first row, shaped to broadcast over its tuples.
    SmallVector<int64_t> offsetShape(indexType.getShape().take_front(batch));
    offsetShape.resize(indexType.getRank() - 1, 1);
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < *batches; ++i)
      offsets.push_back(i * *rowsPerBatch);
    auto offsetType = RankedTensorType::get(offsetShape, b.getI64Type());
    rows = b.create<AddOp>(
        loc, rows.getType(), rows,
        b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                      offsetType, ArrayRef<int64_t>(offsets))));
  }
  SmallVector<int64_t> flat{*total};
  flat.append(shape.begin() + batch + k, shape.end());
  Value data = op.getData();
  if (flat.size() != shape.size() || flat[0] != shape[0])
    data = reshapeTo(b, loc, data, flat);
  Value result =
      b.create<GatherOp>(loc, op.getType(), data, rows, b.getI64IntegerAttr(0));
  op.getOutput().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// DFT has no kernel. With the signal axis moved next to the last
/// (real/imaginary) one and cut or zero-padded to the transform's length n,
/// the signal's n * C values (C = 1 real, 2 complex) times a constant
/// [n * C, m * 2] matrix give the m = n (onesided: n/2 + 1) bins' real and
/// imaginary parts: for x = a + ib, bin j of
///   sum_t x_t (cos w + i s sin w), w = 2 pi j t / n
/// (s = -1, or +1 and a factor 1/n for the inverse) is
///   sum_t (a_t cos w - s b_t sin w) + i (a_t s sin w + b_t cos w).
/// The matrix is computed in double and stored in the signal's type; the
/// MatMul, Reshape, Slice, Concat and Transpose it becomes have kernels and
/// rules, so torch.fft's transforms train.
static LogicalResult expandDFT(onnxir::DFTOp op) {
  using namespace onnxir;
  auto inType = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto outType = dyn_cast<RankedTensorType>(op.getOutput().getType());
  if (!inType || !inType.hasStaticShape() || !outType ||
      !outType.hasStaticShape())
    return op.emitError("DFT needs static shapes, got ")
           << op.getInput().getType() << " -> " << op.getOutput().getType();
  Type element = inType.getElementType();
  int64_t rank = inType.getRank();
  int64_t channels = rank ? inType.getShape().back() : 0;
  if (!isa<FloatType>(element) || rank < 2 || (channels != 1 && channels != 2))
    return op.emitError("DFT's input must be floating point [..., 1] (real) "
                        "or [..., 2] (complex), got ")
           << inType;
  int64_t given = op.getAxis();
  int64_t axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis > rank - 2)
    return op.emitError("DFT's axis ")
           << given << " is out of range for an input of rank " << rank;
  int64_t size = inType.getDimSize(axis), n = size;
  if (!isa<NoneType>(op.getDftLength().getType())) {
    std::optional<SmallVector<int64_t>> length =
        constantIntegers(op.getDftLength());
    if (!length || length->size() != 1)
      return op.emitError("DFT's dft_length must be a constant scalar (the "
                          "transform's matrix is built at import)");
    n = (*length)[0];
  }
  if (n < 1)
    return op.emitError("DFT's length ") << n << " is not positive";
  int64_t bins = op.getOnesided() ? n / 2 + 1 : n;
  // The dense matrix is built here, element by element.
  constexpr int64_t kMaxMatrix = 1 << 24;
  if (n > kMaxMatrix / (channels * bins * 2))
    return op.emitError("DFT's length ")
           << n << " needs a " << n * channels << " x " << bins * 2
           << " matrix, over the " << kMaxMatrix
           << " elements the compiler builds";

  OpBuilder b(op);
  Location loc = op.getLoc();
  auto ints = [&](ArrayRef<int64_t> values) -> Value {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getI64Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, values));
  };
  // The signal axis moved before the real/imaginary one.
  SmallVector<int64_t> perm, shape;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.append({axis, rank - 1});
  for (int64_t d : perm)
    shape.push_back(inType.getDimSize(d));
  Value x = op.getInput();
  if (axis != rank - 2)
    x = b.create<TransposeOp>(loc, RankedTensorType::get(shape, element), x,
                              b.getDenseI64ArrayAttr(perm));
  if (n < size) {
    shape[rank - 2] = n;
    x = b.create<SliceOp>(loc, RankedTensorType::get(shape, element), x,
                          ints({0}), ints({n}), ints({rank - 2}), ints({1}));
  } else if (n > size) {
    SmallVector<int64_t> zerosShape(shape);
    zerosShape[rank - 2] = n - size;
    auto zerosType = RankedTensorType::get(zerosShape, element);
    Value zeros = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(zerosType, b.getFloatAttr(element, 0.0)));
    shape[rank - 2] = n;
    x = b.create<ConcatOp>(loc, RankedTensorType::get(shape, element),
                           ValueRange{x, zeros}, b.getI64IntegerAttr(rank - 2));
  }
  SmallVector<int64_t> rows(shape.begin(), shape.end() - 2);
  rows.push_back(n * channels);
  x = reshapeTo(b, loc, x, rows);

  double sign = op.getInverse() ? 1.0 : -1.0;
  double scale = op.getInverse() ? 1.0 / static_cast<double>(n) : 1.0;
  // Element (t * channels + c, 2 * j + part) of the matrix: bin j's real
  // (part 0) or imaginary part from sample t's real (c 0) or imaginary
  // part; (j * t) mod n keeps the angle exact for long transforms. The
  // elements come in order, so the two parts of a bin share one angle.
  auto matrixType = RankedTensorType::get({n * channels, bins * 2}, element);
  int64_t angle = -1;
  double c = 0, s = 0;
  auto entry = [&](int64_t i) {
    int64_t row = i / (bins * 2), column = i % (bins * 2);
    int64_t t = row / channels, j = column / 2;
    if ((j * t) % n != angle) {
      angle = (j * t) % n;
      double w = 2.0 * M_PI * static_cast<double>(angle) /
                 static_cast<double>(n);
      c = std::cos(w) * scale, s = sign * std::sin(w) * scale;
    }
    bool imaginaryIn = row % channels == 1, imaginaryOut = column % 2 == 1;
    return imaginaryIn ? (imaginaryOut ? c : -s) : (imaginaryOut ? s : c);
  };
  Value weights =
      b.create<ConstantOp>(loc, floatElements(matrixType, entry));
  rows.back() = bins * 2;
  Value y =
      b.create<MatMulOp>(loc, RankedTensorType::get(rows, element), x, weights);
  rows.back() = bins;
  rows.push_back(2);
  y = reshapeTo(b, loc, y, rows);
  if (axis != rank - 2) {
    SmallVector<int64_t> back(rank);
    for (int64_t d = 0; d < rank; ++d)
      back[perm[d]] = d;
    SmallVector<int64_t> outShape;
    for (int64_t d : back)
      outShape.push_back(rows[d]);
    y = b.create<TransposeOp>(loc, RankedTensorType::get(outShape, element), y,
                              b.getDenseI64ArrayAttr(back));
  }
  if (y.getType() != outType)
    return op.emitError("DFT's result is ")
           << outType << ", but its input and attributes give " << y.getType();
  op.getOutput().replaceAllUsesWith(y);
  op.erase();
  return success();
}

/// Whether `value` is an onnx.Constant whose elements all equal `want`.
static bool constantAllEqual(Value value, double want) {
  auto constant = value.getDefiningOp<onnxir::ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements || !isa<FloatType>(elements.getElementType()))
    return false;
  return llvm::all_of(elements.getValues<APFloat>(), [&](const APFloat &v) {
    return v.convertToDouble() == want;
  });
}

/// InstanceNormalization has no kernel. On x of shape (N, C, D1..Dk) it
/// becomes
///   Reshape(LayerNormalization(Reshape(x, [N, C, S]), ones[S], axis 2), x's
///   shape) * Reshape(scale, [C, 1..1]) + Reshape(B, [C, 1..1])
/// with S = D1 * ... * Dk: the layer norm's statistics over the last axis
/// are the instance norm's (biased variance, epsilon inside the root).
/// The Mul and Add are left out when scale is all ones and B all zeros
/// (torch's GroupNorm export, which applies its own affine after). Those
/// ops have kernels and rules, so gradients reach x, scale and B.
static LogicalResult expandInstanceNorm(onnxir::InstanceNormalizationOp op) {
  using namespace onnxir;
  auto xType = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto scaleType = dyn_cast<RankedTensorType>(op.getScale().getType());
  auto biasType = dyn_cast<RankedTensorType>(op.getB().getType());
  if (!xType || !xType.hasStaticShape() || xType.getRank() < 2)
    return op.emitError("InstanceNormalization needs a statically shaped "
                        "input (N, C, D1, ...), got ")
           << op.getInput().getType();
  if (!isa<FloatType>(xType.getElementType()))
    return op.emitError("InstanceNormalization's input must be floating "
                        "point, got ")
           << xType.getElementType();
  int64_t n = xType.getDimSize(0), c = xType.getDimSize(1), s = 1;
  for (int64_t d : xType.getShape().drop_front(2))
    s *= d;
  for (auto [name, type] : {std::pair{"scale", scaleType}, {"B", biasType}})
    if (!type || type.getRank() != 1 || type.getDimSize(0) != c ||
        type.getElementType() != xType.getElementType())
      return op.emitError("InstanceNormalization's ")
             << name << " must be a 1-D tensor of the input's " << c
             << " channels and element type, got "
             << (type ? Type(type) : Type());
  if (op.getOutput().getType() != xType)
    return op.emitError("InstanceNormalization's result is ")
           << op.getOutput().getType() << ", not its input's " << xType;

  OpBuilder b(op);
  Location loc = op.getLoc();
  Type element = xType.getElementType();
  auto reshape = [&](Value value, ArrayRef<int64_t> shape) {
    return reshapeTo(b, loc, value, shape);
  };
  auto rowsType = RankedTensorType::get({n, c, s}, element);
  auto onesType = RankedTensorType::get({s}, element);
  Value ones = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(onesType, b.getFloatAttr(element, 1.0)));
  auto norm = b.create<LayerNormalizationOp>(
      loc, TypeRange{rowsType, b.getNoneType(), b.getNoneType()},
      reshape(op.getInput(), {n, c, s}), ones,
      b.create<NoValueOp>(loc, b.getNoneType()).getResult(),
      b.getI64IntegerAttr(2), op.getEpsilonAttr(), b.getI64IntegerAttr(1));
  Value result = reshape(norm.getY(), xType.getShape());
  SmallVector<int64_t> perChannel(xType.getRank() - 1, 1);
  perChannel[0] = c;
  if (!constantAllEqual(op.getScale(), 1.0) ||
      !constantAllEqual(op.getB(), 0.0)) {
    result =
        b.create<MulOp>(loc, xType, result, reshape(op.getScale(), perChannel));
    result =
        b.create<AddOp>(loc, xType, result, reshape(op.getB(), perChannel));
  }
  op.getOutput().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// A rank-0 constant of `value` in `element` (a float type).
static Value scalarConstant(OpBuilder &b, Location loc, Type element,
                            double value) {
  return b.create<onnxir::ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({}, element),
                                  b.getFloatAttr(element, value)));
}

/// LRN has no kernel. On x of shape (N, C, D1..Dk) it becomes
///   Y = x / (bias + Conv(Reshape(x * x, [N, C, S, 1]), W) viewed back)^beta
/// with S = D1 * ... * Dk and W the constant C x C x 1 x 1 band holding
/// alpha / size where input channel i is in output channel c's window
/// [c - floor((size-1)/2), c + ceil((size-1)/2)] (ONNX's window, torch's
/// LocalResponseNorm's for odd sizes; channels past the edges count as
/// zeros): the 1x1 convolution is alpha / size times the window's square
/// sum. Those ops have kernels and rules, so a gradient reaches x.
static LogicalResult expandLRN(onnxir::LRNOp op) {
  using namespace onnxir;
  auto xType = dyn_cast<RankedTensorType>(op.getX().getType());
  if (!xType || !xType.hasStaticShape() || xType.getRank() < 3)
    return op.emitError("LRN needs a statically shaped input (N, C, D1, ...), "
                        "got ")
           << op.getX().getType();
  if (!isa<FloatType>(xType.getElementType()))
    return op.emitError("LRN's input must be floating point, got ")
           << xType.getElementType();
  int64_t size = op.getSize();
  if (size < 1)
    return op.emitError("LRN's size must be at least 1, got ") << size;
  if (op.getY().getType() != xType)
    return op.emitError("LRN's result is ")
           << op.getY().getType() << ", not its input's " << xType;

  OpBuilder b(op);
  Location loc = op.getLoc();
  Type element = xType.getElementType();
  int64_t n = xType.getDimSize(0), c = xType.getDimSize(1), s = 1;
  for (int64_t d : xType.getShape().drop_front(2))
    s *= d;
  int64_t before = (size - 1) / 2, after = size / 2;
  double weight = op.getAlpha().convertToDouble() / static_cast<double>(size);
  SmallVector<Attribute> band;
  for (int64_t out = 0; out < c; ++out)
    for (int64_t in = 0; in < c; ++in)
      band.push_back(b.getFloatAttr(
          element, in >= out - before && in <= out + after ? weight : 0.0));
  auto bandType = RankedTensorType::get({c, c, 1, 1}, element);
  Value w = b.create<ConstantOp>(loc, DenseElementsAttr::get(bandType, band));
  auto columnsType = RankedTensorType::get({n, c, s, 1}, element);
  Value squares = b.create<MulOp>(loc, xType, op.getX(), op.getX());
  Value sums = b.create<ConvOp>(
      loc, columnsType, reshapeTo(b, loc, squares, {n, c, s, 1}), w,
      b.create<NoValueOp>(loc, b.getNoneType()).getResult(),
      b.getStringAttr("NOTSET"), DenseI64ArrayAttr(), b.getI64IntegerAttr(1),
      b.getDenseI64ArrayAttr({1, 1}), DenseI64ArrayAttr(), DenseI64ArrayAttr());
  Value base = b.create<AddOp>(
      loc, xType, reshapeTo(b, loc, sums, xType.getShape()),
      scalarConstant(b, loc, element, op.getBias().convertToDouble()));
  Value scale = b.create<PowOp>(
      loc, xType, base,
      scalarConstant(b, loc, element, op.getBeta().convertToDouble()));
  op.getY().replaceAllUsesWith(
      b.create<DivOp>(loc, xType, op.getX(), scale).getResult());
  op.erase();
  return success();
}

/// MeanVarianceNormalization has no kernel. It becomes ONNX's own function
/// body, op for op (the conformance data come from it):
///   Y = (X - ReduceMean(X)) / (Sqrt(ReduceMean(X^2) - ReduceMean(X)^2)
///       + 1e-9)
/// the means over `axes` (default [0, 2, 3]) with keepdims. Those ops have
/// kernels and rules, so a gradient reaches X.
static LogicalResult
expandMeanVarianceNorm(onnxir::MeanVarianceNormalizationOp op) {
  using namespace onnxir;
  auto xType = dyn_cast<RankedTensorType>(op.getX().getType());
  if (!xType || !xType.hasStaticShape())
    return op.emitError("MeanVarianceNormalization needs a statically "
                        "shaped input, got ")
           << op.getX().getType();
  if (!isa<FloatType>(xType.getElementType()))
    return op.emitError("MeanVarianceNormalization's input must be floating "
                        "point, got ")
           << xType.getElementType();
  int64_t rank = xType.getRank();
  SmallVector<int64_t> axes(op.getAxes().value_or(ArrayRef<int64_t>{0, 2, 3}));
  SmallVector<int64_t> meanShape(xType.getShape());
  SmallVector<bool> reduced(rank, false);
  for (int64_t &axis : axes) {
    if (axis < -rank || axis >= rank)
      return op.emitError("MeanVarianceNormalization's axis ")
             << axis << " is out of range for its rank-" << rank << " input";
    if (axis < 0)
      axis += rank;
    if (reduced[axis])
      return op.emitError("MeanVarianceNormalization's axis ")
             << axis << " is given twice";
    reduced[axis] = true;
    meanShape[axis] = 1;
  }
  if (op.getY().getType() != xType)
    return op.emitError("MeanVarianceNormalization's result is ")
           << op.getY().getType() << ", not its input's " << xType;

  OpBuilder b(op);
  Location loc = op.getLoc();
  Type element = xType.getElementType();
  auto meanType = RankedTensorType::get(meanShape, element);
  DenseI64ArrayAttr axesAttr = b.getDenseI64ArrayAttr(axes);
  auto mean = [&](Value value) -> Value {
    return b.create<ReduceMeanOp>(loc, meanType, value, axesAttr,
                                  b.getI64IntegerAttr(1));
  };
  Value two = scalarConstant(b, loc, element, 2.0);
  Value meanX = mean(op.getX());
  Value meanSquared = b.create<PowOp>(loc, meanType, meanX, two);
  Value squaresMean = mean(b.create<PowOp>(loc, xType, op.getX(), two));
  Value variance = b.create<SubOp>(loc, meanType, squaresMean, meanSquared);
  Value deviation =
      b.create<AddOp>(loc, meanType, b.create<SqrtOp>(loc, meanType, variance),
                      scalarConstant(b, loc, element, 1e-9));
  Value centered = b.create<SubOp>(loc, xType, op.getX(), meanX);
  op.getY().replaceAllUsesWith(
      b.create<DivOp>(loc, xType, centered, deviation).getResult());
  op.erase();
  return success();
}

/// TopK has no kernel. With k a constant it becomes k rounds over `cur`
/// (initially X) along the axis:
///   idx_i = ArgMax(cur) (ArgMin when smallest), keepdims
///   val_i = GatherElements(X, idx_i)       (the gradient reaches X here)
///   cur   = Where(iota == idx_i, fill, cur) (fill: -inf, or +inf when
///           smallest: the chosen element leaves the race)
/// and Values, Indices = Concat of the val_i, idx_i. ArgMax takes the first
/// of equal elements, so ties go to the lower index, as ONNX says. An
/// element of X equal to fill ties with the taken ones: from the second
/// round on, an index already taken (taken_i, as float32 0/1, says which)
/// is replaced by the first one not taken (ArgMin of taken_i). cur and
/// taken_i are float32 (the ArgMax and ArgMin kernels'); a float16 or
/// bfloat16 X is cast to it for the ranking, exactly.
static LogicalResult expandTopK(onnxir::TopKOp op) {
  using namespace onnxir;
  auto xType = dyn_cast<RankedTensorType>(op.getX().getType());
  if (!xType || !xType.hasStaticShape() || xType.getRank() < 1)
    return op.emitError("TopK needs a statically shaped input, got ")
           << op.getX().getType();
  Type element = xType.getElementType();
  std::optional<SmallVector<int64_t>> k = constantIntegers(op.getK());
  if (!k || k->size() != 1)
    return op.emitError("TopK's K must be a constant (one integer); a K "
                        "known only at run time decides the output's shape");
  int64_t rank = xType.getRank(), given = op.getAxis();
  int64_t axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis >= rank)
    return op.emitError("TopK's axis ")
           << given << " is out of range for rank " << rank;
  int64_t n = xType.getDimSize(axis), count = (*k)[0];
  if (count < 0 || count > n)
    return op.emitError("TopK's K is ")
           << count << ", but axis " << axis << " has " << n << " elements";
  if (count == 0)
    return op.emitError("TopK with K = 0 gives empty results, which the "
                        "compiler does not plan");
  // Each of the K rounds is a pass over the input and a few ops.
  constexpr int64_t kMaxRounds = 1024;
  if (count > kMaxRounds)
    return op.emitError("TopK's K is ")
           << count << ": the importer expands it into K passes over the "
           << "input, at most " << kMaxRounds;
  if (n > kMaxRewriteConstant)
    return op.emitError("TopK's axis ")
           << axis << " has " << n << " elements; the importer's rewrite "
           << "holds their indices as a constant of at most "
           << kMaxRewriteConstant;
  // ArgMax and ArgMin rank float32; float16 and bfloat16 widen to it
  // exactly. Wider types would round, and could order elements wrongly.
  auto f32 = Float32Type::get(op.getContext());
  if (!isa<Float32Type, Float16Type, BFloat16Type>(element))
    return op.emitError("TopK ranks float32, float16 and bfloat16 inputs, "
                        "not ")
           << element;
  bool largest = op.getLargest() != 0;
  SmallVector<int64_t> outShape(xType.getShape());
  outShape[axis] = count;
  auto valuesType = RankedTensorType::get(outShape, element);
  auto indicesType =
      RankedTensorType::get(outShape, IntegerType::get(op.getContext(), 64));
  if (op.getValues().getType() != valuesType ||
      op.getIndices().getType() != indicesType)
    return op.emitError("TopK's results are ")
           << op.getValues().getType() << " and " << op.getIndices().getType()
           << ", but its input and K give " << valuesType << " and "
           << indicesType;

  OpBuilder b(op);
  Location loc = op.getLoc();
  Type i64 = b.getI64Type();
  SmallVector<int64_t> oneShape(xType.getShape()), iotaShape(rank, 1);
  oneShape[axis] = 1;
  iotaShape[axis] = n;
  auto idxType = RankedTensorType::get(oneShape, i64);
  auto valType = RankedTensorType::get(oneShape, element);
  auto hotType = RankedTensorType::get(xType.getShape(), b.getI1Type());
  auto rankType = RankedTensorType::get(xType.getShape(), f32);
  SmallVector<int64_t> ids;
  for (int64_t j = 0; j < n; ++j)
    ids.push_back(j);
  Value iota = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get(iotaShape, i64),
                                  ArrayRef<int64_t>(ids)));
  auto scalar = [&](TypedAttr value) -> Value {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, value.getType()),
                                    value));
  };
  Value fillValue = scalar(FloatAttr::get(
      f32, APFloat::getInf(f32.getFloatSemantics(), /*Negative=*/largest)));
  Value one = scalar(b.getF32FloatAttr(1));
  Value cur = op.getX(), taken;
  if (element != f32)
    cur = b.create<CastOp>(loc, rankType, cur,
                           b.getI64IntegerAttr(onnx::TensorProto::FLOAT));
  SmallVector<Value> values, indices;
  for (int64_t round = 0; round < count; ++round) {
    Value idx =
        largest ? b.create<ArgMaxOp>(loc, idxType, cur, axis, 1, 0).getResult()
                : b.create<ArgMinOp>(loc, idxType, cur, axis, 1, 0).getResult();
    if (taken) {
      Value again = b.create<EqualOp>(
          loc, RankedTensorType::get(oneShape, b.getI1Type()),
          b.create<GatherElementsOp>(loc, RankedTensorType::get(oneShape, f32),
                                     taken, idx, axis),
          one);
      Value firstFree = b.create<ArgMinOp>(loc, idxType, taken, axis, 1, 0);
      idx = b.create<WhereOp>(loc, idxType, again, firstFree, idx);
    }
    indices.push_back(idx);
    values.push_back(
        b.create<GatherElementsOp>(loc, valType, op.getX(), idx, axis));
    if (round + 1 == count)
      break;
    Value hot = b.create<EqualOp>(loc, hotType, iota, idx);
    cur = b.create<WhereOp>(loc, rankType, hot, fillValue, cur);
    taken =
        taken ? b.create<WhereOp>(loc, rankType, hot, one, taken).getResult()
              : b.create<CastOp>(loc, rankType, hot,
                                 b.getI64IntegerAttr(onnx::TensorProto::FLOAT))
                    .getResult();
  }
  auto concat = [&](ArrayRef<Value> parts, Type type) -> Value {
    if (parts.size() == 1)
      return parts.front();
    return b.create<ConcatOp>(loc, type, parts, axis);
  };
  op.getValues().replaceAllUsesWith(concat(values, valuesType));
  op.getIndices().replaceAllUsesWith(concat(indices, indicesType));
  op.erase();
  return success();
}

/// A 3-D Conv has no kernel. Over X [N, C, D, H, W] and W [M, C/g, kd, kh,
/// kw] it becomes kd 2-D convolutions, one per depth tap t, summed:
///   Xt = Transpose(X, [0, 2, 1, 3, 4])      [N, D, C, H, W]
///   Xt = Pad(Xt) along D by the depth pads  (when there are any)
///   Y += Conv2d(Reshape(Gather(Xt, {o*sd + t*dd}, axis 1), [N*Do, C, H, W]),
///               Gather(W, t, axis 2))       [N*Do, M, Ho, Wo]
/// then Y viewed as [N, Do, M, Ho, Wo], transposed back, plus B per
/// channel. The same products and sums as the 3-D convolution; those ops
/// have kernels and rules, so gradients reach X, W and B. Pads come from
/// `pads` or `auto_pad` as for the other convolutions (onnxir::windowPads).
static LogicalResult expandConv3d(onnxir::ConvOp op) {
  using namespace onnxir;
  auto xType = dyn_cast<RankedTensorType>(op.getX().getType());
  auto wType = dyn_cast<RankedTensorType>(op.getW().getType());
  auto yType = dyn_cast<RankedTensorType>(op.getY().getType());
  if (!xType || xType.getRank() != 5)
    return success();
  if (!xType.hasStaticShape() || !wType || !wType.hasStaticShape() ||
      wType.getRank() != 5 || !yType || !yType.hasStaticShape())
    return op.emitError("a 3-D Conv needs static shapes, got ")
           << op.getX().getType() << " and " << op.getW().getType();
  SmallVector<int64_t> strides = op.getStridesOrDefault();
  SmallVector<int64_t> given = op.getPadsOrDefault();
  SmallVector<int64_t> dil = op.getDilationsOrDefault();
  if (llvm::any_of(strides, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(dil, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(given, [](int64_t v) { return v < 0; }))
    return op.emitError("a 3-D Conv's strides and dilations must be >= 1 "
                        "and its pads >= 0");
  ArrayRef<int64_t> x = xType.getShape(), w = wType.getShape();
  std::string why;
  FailureOr<SmallVector<int64_t>> resolved =
      windowPads(op.getAutoPad(), given, strides, dil, x, w.drop_front(2), why);
  if (failed(resolved))
    return op.emitError("a 3-D Conv's ") << why;
  ArrayRef<int64_t> pads = *resolved;
  int64_t n = x[0], c = x[1], depth = x[2], m = w[0], kd = w[2];
  std::optional<int64_t> total = llvm::checkedAdd(depth, pads[0]);
  total = total ? llvm::checkedAdd(*total, pads[3]) : total;
  std::optional<int64_t> reach = llvm::checkedMul(kd - 1, dil[0]);
  if (!total || !reach)
    return op.emitError("a 3-D Conv's depth pads (")
           << pads[0] << ", " << pads[3] << ") or dilation " << dil[0]
           << " are too large";
  int64_t padded = *total;
  int64_t od = yType.getDimSize(2), oh = yType.getDimSize(3),
          ow = yType.getDimSize(4);
  if (padded <= *reach || od != (padded - *reach - 1) / strides[0] + 1)
    return op.emitError("a 3-D Conv's result ")
           << yType << " does not match its input, weight and window";

  OpBuilder b(op);
  Location loc = op.getLoc();
  Type element = xType.getElementType(), i64 = b.getI64Type();
  auto ints = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> values) -> Value {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get(shape, i64), values));
  };
  auto reshape = [&](Value value, ArrayRef<int64_t> shape) {
    return reshapeTo(b, loc, value, shape);
  };
  SmallVector<int64_t> swap{0, 2, 1, 3, 4};
  Value xt = b.create<TransposeOp>(
      loc, RankedTensorType::get({n, depth, c, x[3], x[4]}, element), op.getX(),
      b.getDenseI64ArrayAttr(swap));
  if (pads[0] != 0 || pads[3] != 0)
    xt = b.create<PadOp>(
        loc, RankedTensorType::get({n, padded, c, x[3], x[4]}, element), xt,
        ints({10}, {0, pads[0], 0, 0, 0, 0, pads[3], 0, 0, 0}),
        b.create<NoValueOp>(loc, b.getNoneType()).getResult(),
        b.getStringAttr("constant"));
  auto planeType = RankedTensorType::get({n * od, m, oh, ow}, element);
  Value none = b.create<NoValueOp>(loc, b.getNoneType());
  Value sum;
  for (int64_t t = 0; t < kd; ++t) {
    SmallVector<int64_t> rows;
    for (int64_t o = 0; o < od; ++o)
      rows.push_back(o * strides[0] + t * dil[0]);
    Value slices = b.create<GatherOp>(
        loc, RankedTensorType::get({n, od, c, x[3], x[4]}, element), xt,
        ints({od}, rows), b.getI64IntegerAttr(1));
    Value tap = b.create<GatherOp>(
        loc, RankedTensorType::get({m, w[1], w[3], w[4]}, element), op.getW(),
        ints({}, {t}), b.getI64IntegerAttr(2));
    Value plane = b.create<ConvOp>(
        loc, planeType, reshape(slices, {n * od, c, x[3], x[4]}), tap, none,
        b.getStringAttr("NOTSET"), b.getDenseI64ArrayAttr({dil[1], dil[2]}),
        op.getGroupAttr(), DenseI64ArrayAttr(),
        b.getDenseI64ArrayAttr({pads[1], pads[2], pads[4], pads[5]}),
        b.getDenseI64ArrayAttr({strides[1], strides[2]}));
    sum = sum ? b.create<AddOp>(loc, planeType, sum, plane).getResult() : plane;
  }
  Value result =
      b.create<TransposeOp>(loc, yType, reshape(sum, {n, od, m, oh, ow}),
                            b.getDenseI64ArrayAttr(swap));
  if (!isa<NoneType>(op.getB().getType()))
    result =
        b.create<AddOp>(loc, yType, result, reshape(op.getB(), {m, 1, 1, 1}));
  op.getY().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// An Einsum operand whose term repeats a letter (a diagonal: "ii->i",
/// "...ii->...i") becomes that diagonal first, in ops with kernels and
/// rules: the letter's r dims of size n moved last (Transpose, unless they
/// are), viewed as one dim of n^r elements (Reshape), every
/// (n^r - 1) / (n - 1)-th of them from the first (Slice), so that the
/// Einsum left has distinct letters. An Einsum without static shapes, or
/// whose repeated dims differ, is left for the lowering to refuse, naming
/// the equation.
static LogicalResult expandEinsumDiagonal(onnxir::EinsumOp op) {
  using namespace onnxir;
  SmallVector<int64_t> ranks;
  for (Value input : op.getInputs()) {
    auto type = dyn_cast<RankedTensorType>(input.getType());
    if (!type || !type.hasStaticShape())
      return success();
    ranks.push_back(type.getRank());
  }
  FailureOr<EinsumTerms> terms = einsumTerms(op.getEquation(), ranks);
  if (failed(terms) || terms->inputs.size() != ranks.size())
    return success();
  auto firstRepeated = [](StringRef term) {
    for (auto [d, c] : llvm::enumerate(term))
      if (term.count(c) > 1)
        return d;
    return StringRef::npos;
  };
  bool repeats = false;
  for (auto [input, term] : llvm::zip(op.getInputs(), terms->inputs)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(input.getType()).getShape();
    if (shape.size() != term.size())
      return success();
    for (auto [d, c] : llvm::enumerate(term))
      if (shape[d] != shape[term.find(c)])
        return success();
    repeats |= firstRepeated(term) != StringRef::npos;
  }
  if (!repeats)
    return success();

  OpBuilder b(op);
  Location loc = op.getLoc();
  auto ints = [&](ArrayRef<int64_t> values) -> Value {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getI64Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, values));
  };
  SmallVector<Value> inputs(op.getInputs());
  for (auto [input, term] : llvm::zip(inputs, terms->inputs)) {
    for (size_t at; (at = firstRepeated(term)) != StringRef::npos;) {
      // The dims of letter c moved last and flattened: the diagonal is
      // every step-th element of them.
      char c = term[at];
      auto type = cast<RankedTensorType>(input.getType());
      int64_t n = type.getDimSize(at), elements = 1;
      SmallVector<int64_t> perm, shape;
      std::string kept;
      for (auto [d, letter] : llvm::enumerate(term))
        if (letter != c) {
          perm.push_back(d);
          shape.push_back(type.getDimSize(d));
          kept.push_back(letter);
        }
      SmallVector<int64_t> moved(shape);
      for (auto [d, letter] : llvm::enumerate(term))
        if (letter == c) {
          perm.push_back(d);
          moved.push_back(n);
          elements *= n;
        }
      Value last = input;
      if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
        last = b.create<TransposeOp>(
            loc, RankedTensorType::get(moved, type.getElementType()), input,
            b.getDenseI64ArrayAttr(perm));
      Value lined = reshapeTo(b, loc, last,
                              llvm::to_vector(llvm::concat<const int64_t>(
                                  shape, ArrayRef<int64_t>(elements))));
      int64_t step = n > 1 ? (elements - 1) / (n - 1) : 1;
      shape.push_back(n);
      input = b.create<SliceOp>(
          loc, RankedTensorType::get(shape, type.getElementType()), lined,
          ints({0}), ints({elements}),
          ints({static_cast<int64_t>(shape.size()) - 1}), ints({step}));
      term = kept + c;
    }
  }
  std::string equation = llvm::join(terms->inputs, ",") + "->" + terms->output;
  op.getResult().replaceAllUsesWith(
      b.create<EinsumOp>(loc, op.getType(), inputs, b.getStringAttr(equation))
          .getResult());
  op.erase();
  return success();
}

/// Applies `expand` (one of the rewrites above: an op without a kernel
/// into ops with kernels and rules) to every op of its kind in `module`;
/// fails at the first that fails (it has named the node).
template <typename OpT>
static LogicalResult expandAll(ModuleOp module, LogicalResult (*expand)(OpT)) {
  SmallVector<OpT> ops;
  module.walk([&](OpT op) { ops.push_back(op); });
  for (OpT op : ops)
    if (failed(expand(op)))
      return failure();
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  std::string message;
  std::optional<ModelFile> read = ::fsdp::onnx_import::readModel(path, message);
  if (!read) {
    emitError(fileLoc) << message;
    return nullptr;
  }
  file = std::move(*read);
  if (failed(checkOpsets()) || failed(resolveExternalData()) ||
      failed(readMetadata()) || failed(classify()) ||
      failed(specialiseShapes()) || failed(check()) ||
      failed(options.fold ? foldShapeComputations() : infer()))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  (*module)->setAttr("fsdp.source", builder.getStringAttr(absolute));
  (*module)->setAttr("fsdp.onnx.opset", builder.getI64IntegerAttr(opset));
  if (!file.model.producer_name().empty())
    (*module)->setAttr(
        "fsdp.onnx.producer",
        builder.getStringAttr(
            file.model.producer_version().empty()
                ? file.model.producer_name()
                : file.model.producer_name() + " " +
                      file.model.producer_version()));
  if (!metadata.json.empty())
    (*module)->setAttr("fsdp.torch_metadata",
                       builder.getStringAttr(metadata.json));

  if (failed(declareState(*module)) || failed(buildForward(*module)) ||
      failed(expandAll(*module, expandEyeLike)) ||
      failed(expandAll(*module, expandRange)) ||
      failed(expandAll(*module, expandOneHot)) ||
      failed(expandAll(*module, expandDFT)) ||
      failed(expandAll(*module, expandGatherND)) ||
      failed(expandAll(*module, expandInstanceNorm)) ||
      failed(expandAll(*module, expandLRN)) ||
      failed(expandAll(*module, expandEinsumDiagonal)) ||
      failed(expandAll(*module, expandMeanVarianceNorm)) ||
      failed(expandAll(*module, expandTopK)) ||
      failed(expandAll(*module, expandConv3d)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  if (options.fold) {
    GreedyRewriteConfig config;
    config.useTopDownTraversal = true;
    RewritePatternSet none(&context);
    if (failed(applyPatternsAndFoldGreedily(module->getOperation(),
                                            std::move(none), config)))
      emitWarning(fileLoc) << "folding shape computations did not converge";
  }
  return module;
}

} // namespace

namespace fsdp {

OwningOpRef<ModuleOp> importONNX(StringRef path, MLIRContext &context,
                                 const ONNXImportOptions &options) {
  context.loadDialect<fsdpir::FSDPDialect, onnxir::ONNXDialect, func::FuncDialect>();
  return Importer(path, context, options).run();
}

} // namespace fsdp
