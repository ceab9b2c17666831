import Lake
open Lake DSL

/-! kvwindow: machine-checked spec of a sliding-window KV cache. Core Lean only:
no dependencies, so `lake build` needs nothing but the toolchain named in
`lean-toolchain`. -/

package kvwindow

@[default_target]
lean_lib KVWindow where
  srcDir := "lean"
