# -*- Python -*-
# lit configuration for the FSDP-MLIR regression tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FSDP-MLIR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = [
    "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "corpus"
]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fsdp_src_root", config.fsdp_src_root))
config.substitutions.append(("%fsdp_obj_root", config.fsdp_obj_root))
config.substitutions.append(("%python", config.python_executable))
# mpirun with a session directory of its own (test/tools/Inputs).
config.substitutions.append(
    ("%mpirun", os.path.join(config.fsdp_src_root, "test", "tools", "Inputs",
                             "mpirun-isolated.sh")))
config.substitutions.append(("%corpus", config.fsdp_corpus_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# FileCheck, not, count, split-file come from Debian's LLVM 19, never from an
# older LLVM that may be first on PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    [ToolSubst(tool, unresolved="fatal")
     for tool in ("fsdp-opt", "fsdp-translate", "fsdp-run")],
    [config.fsdp_tools_dir],
)
