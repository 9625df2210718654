# lit configuration of the compiler tests (test/lit/*.mlir).
import os
import lit.formats

config.name = "trellisc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.join(config.trellis_src_root, "test", "lit")
config.test_exec_root = os.path.join(config.trellis_obj_root, "test", "lit")

# Our tools first, then LLVM's FileCheck/not/count.
config.environment["PATH"] = os.pathsep.join(
    [config.trellis_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
config.substitutions.append(("%trellis_src", config.trellis_src_root))
config.substitutions.append(("%python", "/usr/bin/python3"))
