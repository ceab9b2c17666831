/-!
# KVWindow.Spec: the definitions

The model of a sliding-window KV cache (DESIGN §1). Entries are opaque to the
list functions; only the position theorems look at `Entry.pos`.

* `lastWindow w hs`: the last `min w n` entries of the history (the spec).
* `step w c x`: append `x`; if the cache now holds more than `w`, drop the oldest.
* `run w hs`: the cache after streaming `hs` one token at a time from `[]`.
* `pushChunk w c ys`: a prefill chunk of any length, token by token.
* `Valid w hs c`: the cache `c` is exactly the window of the history `hs`.

The Python mirror is `pyspec/spec.py`.
-/

namespace KVWindow

/-- A cache entry: the absolute position of its token and an abstract payload
(the key and value vectors, never inspected by the proofs). -/
structure Entry (κ : Type) where
  pos : Nat
  payload : κ

/-- The spec: the last `min w n` entries of a history of length `n`. -/
def lastWindow {α : Type} (w : Nat) (hs : List α) : List α :=
  hs.drop (hs.length - w)

/-- One decode step of the list model: append, then evict the oldest if over `w`. -/
def step {α : Type} (w : Nat) (c : List α) (x : α) : List α :=
  if w < (c ++ [x]).length then (c ++ [x]).drop 1 else c ++ [x]

/-- The cache after streaming `hs` from an empty cache. -/
def run {α : Type} (w : Nat) (hs : List α) : List α :=
  hs.foldl (step w) []

/-- The simulation relation: `c` is the window of `hs`. -/
def Valid {α : Type} (w : Nat) (hs c : List α) : Prop :=
  c = lastWindow w hs

/-- Push a prefill chunk (of any length, possibly longer than `w`) onto a cache. -/
def pushChunk {α : Type} (w : Nat) (c ys : List α) : List α :=
  ys.foldl (step w) c

/-- `natsFrom b n = [b, b+1, ..., b+n-1]`: the positions of `n` consecutive tokens. -/
def natsFrom : Nat → Nat → List Nat
  | _, 0 => []
  | b, n + 1 => b :: natsFrom (b + 1) n

end KVWindow
