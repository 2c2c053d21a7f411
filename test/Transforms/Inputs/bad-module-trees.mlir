// Malformed fsdp.modules trees (see fsdp-auto-wrap-errors.mlir).
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = ["a"]>]} {
}
// -----
module attributes {fsdp.modules = []} {
}
// -----
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = []>, #fsdp.module<"", class = "", params = [], buffers = [], children = []>]} {
}
// -----
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = ["a.b"]>, #fsdp.module<"a.b", class = "", params = [], buffers = [], children = []>]} {
}
