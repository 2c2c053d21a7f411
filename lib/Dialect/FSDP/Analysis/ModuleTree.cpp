//===- ModuleTree.cpp - Recover the PyTorch module hierarchy --------------===//
//
/// ONNX has no notion of modules, but an export leaves three traces of them:
/// the frontend's module table (exact, with class names), parameter FQNs,
/// and node scopes. The tree is built by visiting them in that order; a
/// module is created (with its ancestors) on first sight, so children keep
/// the order in which PyTorch registered them whenever the table is present,
/// and first-use order otherwise.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Support/JSON.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {

class TreeBuilder {
public:
  /// The index of module `fqn`, created with its ancestors if new.
  unsigned ensure(StringRef fqn) {
    auto found = index.find(fqn);
    if (found != index.end())
      return found->second;
    if (!fqn.empty())
      nodes[ensure(parentOf(fqn))].children.push_back(fqn.str());
    unsigned id = nodes.size();
    nodes.push_back(Node{fqn.str(), "", {}, {}, {}});
    index[fqn] = id;
    return id;
  }

  bool contains(StringRef fqn) const { return index.count(fqn); }

  void setClass(StringRef fqn, StringRef className) {
    nodes[ensure(fqn)].className = className.str();
  }

  /// Records that the module owning `fqn` (a parameter or buffer FQN) holds
  /// it under that name.
  void addState(StringRef fqn, bool isParam) {
    Node &node = nodes[ensure(parentOf(fqn))];
    SmallVector<std::string> &list = isParam ? node.params : node.buffers;
    if (!llvm::is_contained(list, fqn))
      list.push_back(fqn.str());
  }

  SmallVector<ModuleAttr> build(MLIRContext *context) const {
    Builder b(context);
    auto strings = [&](ArrayRef<std::string> values) {
      SmallVector<StringRef> refs(values.begin(), values.end());
      return b.getStrArrayAttr(refs);
    };
    // Pre-order from the root, children in the order they were found: the
    // order of named_modules().
    SmallVector<ModuleAttr> result;
    SmallVector<unsigned> stack = {index.lookup("")};
    while (!stack.empty()) {
      const Node &node = nodes[stack.pop_back_val()];
      result.push_back(ModuleAttr::get(
          context, node.fqn, node.className, strings(node.params),
          strings(node.buffers), strings(node.children)));
      for (const std::string &child : llvm::reverse(node.children))
        stack.push_back(index.lookup(child));
    }
    return result;
  }

private:
  struct Node {
    std::string fqn, className;
    SmallVector<std::string> params, buffers, children;
  };
  std::vector<Node> nodes;
  llvm::StringMap<unsigned> index;
};

/// Reads the frontend's module table, if the import recorded one.
LogicalResult readMetadata(ModuleOp module, TreeBuilder &tree) {
  auto json = module->getAttrOfType<StringAttr>("fsdp.torch_metadata");
  if (!json)
    return success();
  if (std::string why = checkJSONBounds(json.getValue()); !why.empty())
    return emitError(module.getLoc()) << "fsdp.torch_metadata " << why;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json.getValue());
  if (!parsed)
    return emitError(module.getLoc())
           << "fsdp.torch_metadata is not valid JSON: "
           << llvm::toString(parsed.takeError());
  llvm::json::Object *root = parsed->getAsObject();
  llvm::json::Array *modules = root ? root->getArray("modules") : nullptr;
  if (!modules)
    return emitError(module.getLoc())
           << "fsdp.torch_metadata has no 'modules' list";
  for (llvm::json::Value &item : *modules) {
    llvm::json::Object *entry = item.getAsObject();
    std::optional<StringRef> fqn =
        entry ? entry->getString("fqn") : std::nullopt;
    if (!fqn)
      return emitError(module.getLoc())
             << "fsdp.torch_metadata: a module entry has no 'fqn'";
    tree.setClass(*fqn, entry->getString("class").value_or(""));
    for (StringRef key : {"params", "buffers"})
      if (llvm::json::Array *names = entry->getArray(key))
        for (llvm::json::Value &name : *names)
          if (std::optional<StringRef> text = name.getAsString())
            tree.addState(*text, key == "params");
  }
  return success();
}

/// The module components of a node scope: `/model/blocks.0/attn/MatMul` ->
/// [model, blocks.0, attn].
SmallVector<StringRef> scopeParts(StringRef scope) {
  SmallVector<StringRef> parts;
  if (!scope.starts_with("/"))
    return parts;
  scope.drop_front().split(parts, '/');
  parts.pop_back(); // The node's own name.
  return parts;
}

/// The wrapper scope the frontend's metadata names: "scope_prefix" ("" for
/// none), else `model` for a loss export from before that field
/// (fsdp_mlir.export's loss wrapper calls the model `model`) and "" for
/// others; nothing without the metadata.
std::optional<std::string> metadataWrapper(ModuleOp module) {
  auto json = module->getAttrOfType<StringAttr>("fsdp.torch_metadata");
  if (!json || !checkJSONBounds(json.getValue()).empty())
    return std::nullopt;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json.getValue());
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return std::nullopt;
  if (std::optional<StringRef> prefix = root->getString("scope_prefix"))
    return prefix->str();
  return std::string(root->getBoolean("loss").value_or(false) ? "model" : "");
}

/// The name of a wrapper module that prefixes every scope but owns no
/// state: the one the frontend's metadata names, else the first component
/// of all multi-component scopes, when it is no known module and the
/// component after it is one. Hugging Face's *ForCausalLM keep their base
/// model in `model`, so /model/model/embed_tokens/Gather is the wrapper's
/// model.embed_tokens: only the metadata can say so.
std::optional<std::string> detectWrapper(ModuleOp module,
                                         const TreeBuilder &tree) {
  if (std::optional<std::string> named = metadataWrapper(module))
    return named->empty() ? std::nullopt : named;
  std::optional<std::string> wrapper;
  bool consistent = true, confirmed = false;
  module.walk([&](Operation *op) {
    auto name = dyn_cast<NameLoc>(op->getLoc());
    if (!name)
      return;
    SmallVector<StringRef> parts = scopeParts(name.getName().getValue());
    if (parts.size() < 2)
      return;
    if (!wrapper)
      wrapper = parts[0].str();
    consistent &= *wrapper == parts[0];
    confirmed |= tree.contains(parts[1]);
  });
  if (!wrapper || !consistent || !confirmed || tree.contains(*wrapper))
    return std::nullopt;
  return wrapper;
}

/// The module FQN a node scope (`/model/blocks.0/mlp/mlp.0/Gemm`) names, or
/// nothing for a node outside every module.
std::optional<std::string>
scopeModule(StringRef scope, const std::optional<std::string> &wrapper,
            const TreeBuilder &tree) {
  SmallVector<StringRef> parts = scopeParts(scope);
  if (wrapper && !parts.empty() && parts.front() == *wrapper)
    parts.erase(parts.begin());
  if (parts.empty())
    return std::nullopt;
  std::string fqn;
  StringRef last;
  for (StringRef part : parts) {
    // Sequential and ModuleList children appear as `name.i` inside `name`.
    if (!last.empty() && part.starts_with(last) &&
        part.drop_front(last.size()).starts_with("."))
      part = part.drop_front(last.size() + 1);
    std::string candidate = fqn.empty() ? part.str() : fqn + "." + part.str();
    // A module called twice gets `_1`, `_2`... in its second scope.
    if (!tree.contains(candidate)) {
      StringRef base = part.rsplit('_').first;
      std::string unsuffixed =
          fqn.empty() ? base.str() : fqn + "." + base.str();
      if (base != part && tree.contains(unsuffixed))
        candidate = unsuffixed;
    }
    fqn = std::move(candidate);
    last = part;
  }
  return fqn;
}

} // namespace

StringRef mlir::fsdp::parentOf(StringRef fqn) {
  size_t dot = fqn.rfind('.');
  return dot == StringRef::npos ? StringRef() : fqn.take_front(dot);
}

SmallVector<StringRef> mlir::fsdp::stringsOf(ArrayAttr array) {
  return llvm::to_vector(
      llvm::map_range(array.getAsRange<StringAttr>(),
                      [](StringAttr value) { return value.getValue(); }));
}

FailureOr<SmallVector<ModuleAttr>>
mlir::fsdp::recoverModuleTree(ModuleOp module) {
  TreeBuilder tree;
  tree.ensure("");
  if (failed(readMetadata(module, tree)))
    return failure();
  bool haveMetadata = module->hasAttr("fsdp.torch_metadata");

  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      tree.addState(param.getSymName(), /*isParam=*/true);
      if (std::optional<ArrayAttr> aliases = param.getAliases())
        for (StringAttr alias : aliases->getAsRange<StringAttr>())
          tree.addState(alias.getValue(), /*isParam=*/true);
    } else if (auto buffer = dyn_cast<BufferOp>(op)) {
      tree.addState(buffer.getSymName(), /*isParam=*/false);
    }
  }

  // Scopes add the modules without state (activations, containers). With
  // the exporter's table every module is known already; scopes then only
  // confirm it, and a scope naming an unknown module is an exporter quirk.
  std::optional<std::string> wrapper = detectWrapper(module, tree);
  module.walk([&](Operation *op) {
    auto name = dyn_cast<NameLoc>(op->getLoc());
    if (!name)
      return;
    std::optional<std::string> fqn =
        scopeModule(name.getName().getValue(), wrapper, tree);
    if (fqn && (!haveMetadata || tree.contains(*fqn)))
      tree.ensure(*fqn);
  });
  return tree.build(module.getContext());
}

struct ScopeResolver::Impl {
  TreeBuilder tree;
  std::optional<std::string> wrapper;
};

ScopeResolver::ScopeResolver(ModuleOp module, ArrayRef<ModuleAttr> tree)
    : impl(std::make_unique<Impl>()) {
  impl->tree.ensure("");
  for (ModuleAttr entry : tree)
    impl->tree.ensure(entry.getFqn());
  impl->wrapper = detectWrapper(module, impl->tree);
}

ScopeResolver::~ScopeResolver() = default;

std::optional<std::string> ScopeResolver::moduleOf(Operation *op) const {
  auto name = dyn_cast<NameLoc>(op->getLoc());
  if (!name || !name.getName().getValue().starts_with("/"))
    return std::nullopt;
  std::optional<std::string> fqn =
      scopeModule(name.getName().getValue(), impl->wrapper, impl->tree);
  if (!fqn)
    return std::string(); // A node directly under the root.
  // Scopes may name modules the tree lacks (exporter quirks): use the
  // innermost known ancestor.
  StringRef known = *fqn;
  while (!known.empty() && !impl->tree.contains(known))
    known = parentOf(known);
  return known.str();
}

FailureOr<SmallVector<ModuleAttr>> mlir::fsdp::getModuleTree(ModuleOp module) {
  if (auto recorded = module->getAttrOfType<ArrayAttr>(kModulesAttrName)) {
    SmallVector<ModuleAttr> tree;
    llvm::StringSet<> seen;
    for (Attribute entry : recorded) {
      auto moduleAttr = dyn_cast<ModuleAttr>(entry);
      if (!moduleAttr)
        return emitError(module.getLoc())
               << kModulesAttrName << " holds " << entry
               << ", which is not an #fsdp.module";
      if (!seen.insert(moduleAttr.getFqn()).second)
        return emitError(module.getLoc())
               << kModulesAttrName << " lists module '" << moduleAttr.getFqn()
               << "' twice";
      tree.push_back(moduleAttr);
    }
    // Passes walk the tree by children: every child must exist and sit
    // directly below its parent, and the root must be there.
    if (!seen.contains(""))
      return emitError(module.getLoc())
             << kModulesAttrName << " has no root module (\"\")";
    for (ModuleAttr entry : tree)
      for (StringRef child : stringsOf(entry.getChildren()))
        if (!seen.contains(child) || parentOf(child) != entry.getFqn())
          return emitError(module.getLoc())
                 << kModulesAttrName << ": module '" << entry.getFqn()
                 << "' lists child '" << child
                 << "', which is not a module directly below it";
    return tree;
  }
  return recoverModuleTree(module);
}
