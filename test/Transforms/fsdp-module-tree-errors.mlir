// A malformed module tree is refused at the module whose attribute holds it
// (fsdp.modules, or the frontend's fsdp.torch_metadata), by the pass that
// read it.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-auto-wrap=policy=none

// expected-error @+1 {{fsdp-auto-wrap: fsdp.modules: module '' lists child 'a', which is not a module directly below it}}
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = ["a"]>]} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.modules has no root module ("")}}
module attributes {fsdp.modules = []} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.modules lists module '' twice}}
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = []>, #fsdp.module<"", class = "", params = [], buffers = [], children = []>]} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.modules: module '' lists child 'a.b', which is not a module directly below it}}
module attributes {fsdp.modules = [#fsdp.module<"", class = "", params = [], buffers = [], children = ["a.b"]>, #fsdp.module<"a.b", class = "", params = [], buffers = [], children = []>]} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.modules holds "x", which is not an #fsdp.module}}
module attributes {fsdp.modules = ["x"]} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.torch_metadata is not valid JSON}}
module attributes {fsdp.torch_metadata = "{\"modules\": "} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.torch_metadata has no 'modules' list}}
module attributes {fsdp.torch_metadata = "{}"} {
}

// -----

// expected-error @+1 {{fsdp-auto-wrap: fsdp.torch_metadata: a module entry has no 'fqn'}}
module attributes {fsdp.torch_metadata = "{\"modules\": [{\"class\": \"Net\"}]}"} {
}
