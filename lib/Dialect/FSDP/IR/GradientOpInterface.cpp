//===- GradientOpInterface.cpp - Reverse-mode rule of an op ---------------===//

#include "fsdp/Dialect/FSDP/IR/GradientOpInterface.h"

#include "fsdp/Dialect/FSDP/IR/GradientOpInterface.cpp.inc"
