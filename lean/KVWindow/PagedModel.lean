import KVWindow.Ring
import KVWindow.Attention

/-!
# KVWindow.PagedModel: many sequences in one pool of blocks

The model of `docs/paged.md` (DESIGN §1 "Paged caches"). A pool has physical blocks of `B`
slots (`mem b i`: slot `i` of block `b`, `none` if never written), a free list, the live
sequences, and per sequence its length `len s` (tokens seen), block table `table s` (entry `j`:
the physical block of logical block `j`, positions `B*j .. B*j+B-1`, or `none`) and identity tag.

* Reference counts are not state: `refcount P b` counts the entries `some b` in the tables of
  the live sequences, so "refcounts count references" holds by definition, and the invariant
  says the free list agrees with it (`FreeOK`).
* `appendTok` places an entry (a fresh block, a copy of a shared block, or in place), counts it
  (`bump`), then applies the freeing rule (`rule`): every logical block all of whose positions
  are below the oldest one the next query needs is released (`releaseAt`); a block whose last
  reference goes joins the tail of the free list (`pushIfUnref`).
* every op returns `none` when it fails: then the caller keeps the old pool (nothing changed).
* the history of each sequence is not in the pool: `Op.hist` says what an op does to it, and
  `PoolHolds` relates a pool to histories (the theorems are in `KVWindow.Paged`).

`W` is the window (keys a query attends to, itself included), `B` the block size, `N` the number
of blocks. The Python mirror is `pyspec/paged_model.py` (the ops) and `pyspec/paged.py` (the
invariants).
-/

namespace KVWindow

open KVList KVArith

/-! ## Functions, tables and counts -/

/-- `f` with the value at `s` replaced by `v`. -/
def upd {β : Type} (f : Nat → β) (s : Nat) (v : β) (t : Nat) : β :=
  if t = s then v else f t

/-- Entry `j` of a table := `y`, padding with `none` past the end. -/
def setExt {β : Type} : List (Option β) → Nat → Option β → List (Option β)
  | [], 0, y => [y]
  | [], n + 1, y => none :: setExt [] n y
  | _ :: l, 0, y => y :: l
  | a :: l, n + 1, y => a :: setExt l n y

/-- 1 if the table entry is `some d`, else 0. -/
def ind (d : Nat) : Option Nat → Nat
  | none => 0
  | some c => if c = d then 1 else 0

/-- How many entries of one table are `some d`. -/
def countIn (d : Nat) : List (Option Nat) → Nat
  | [] => 0
  | o :: l => ind d o + countIn d l

/-- References to block `d` from the tables of the sequences in the list. -/
def refsIn (tb : Nat → List (Option Nat)) (d : Nat) : List Nat → Nat
  | [] => 0
  | t :: l => countIn d (tb t) + refsIn tb d l

/-- `s` occurs in the list (the `Bool` the ops decide on; `memN_iff` relates it to `InL`). -/
def memN (s : Nat) : List Nat → Bool
  | [] => false
  | a :: l => if a = s then true else memN s l

/-- `Option` bind, by its two equations. -/
def bindO {β γ : Type} : Option β → (β → Option γ) → Option γ
  | none, _ => none
  | some a, f => f a

/-! ## The pool -/

/-- A pool: slots, free list (least recently freed first), live sequences, and per sequence its
length, block table and identity tag. -/
structure Pool (α : Type) where
  mem : Nat → Nat → Option α
  free : List Nat
  live : List Nat
  len : Nat → Nat
  table : Nat → List (Option Nat)
  ident : Nat → Nat

/-- The reference count of block `b`: the entries `some b` in the live tables. -/
def refcount {α : Type} (P : Pool α) (b : Nat) : Nat :=
  refsIn P.table b P.live

/-- Slot `i` of block `b` := `x`. -/
def writeMem {α : Type} (m : Nat → Nat → Option α) (b i : Nat) (x : α) (b' i' : Nat) : Option α :=
  if b' = b ∧ i' = i then some x else m b' i'

/-- Block `dst` := every slot of block `src` (copy on write). -/
def copyBlock {α : Type} (m : Nat → Nat → Option α) (src dst : Nat) (b' i' : Nat) : Option α :=
  if b' = dst then m src i' else m b' i'

/-! ## One append -/

/-- Take the first free block `c` for logical block `j` of `s`: `table s [j] := c`, slots
`m c`; `none` if the free list is empty (pool exhausted). -/
def takeWith {α : Type} (P : Pool α) (s j : Nat) (m : Nat → Nat → Nat → Option α) :
    List Nat → Option (Pool α)
  | [] => none
  | c :: rest =>
    some { P with free := rest, table := upd P.table s (setExt (P.table s) j (some c)), mem := m c }

/-- Write `x` into slot `i` of logical block `j` of `s`, whose table entry is the last argument:
a fresh block if `none`; a copy if the block is shared (refcount ≥ 2: a shared block is never
written); else in place. -/
def placeWith {α : Type} (P : Pool α) (s j i : Nat) (x : α) : Option Nat → Option (Pool α)
  | none => takeWith P s j (fun c => writeMem P.mem c i x) P.free
  | some b =>
    if 2 ≤ refcount P b then takeWith P s j (fun c => writeMem (copyBlock P.mem b c) c i x) P.free
    else some { P with mem := writeMem P.mem b i x }

/-- `len s := len s + 1`. -/
def bump {α : Type} (P : Pool α) (s : Nat) : Pool α :=
  { P with len := upd P.len s (P.len s + 1) }

/-- After a reference to `b` went away: `b` joins the tail of the free list if no live table
references it any more. -/
def pushIfUnref {α : Type} (P : Pool α) (b : Nat) : Pool α :=
  if refcount P b = 0 then { P with free := P.free ++ [b] } else P

/-- `table s := l`. -/
def dropRef {α : Type} (P : Pool α) (s : Nat) (l : List (Option Nat)) : Pool α :=
  { P with table := upd P.table s l }

/-- Entry `j` of `s`'s table, which holds the last argument, := `none`; the block is freed if
that was its last reference. -/
def releaseWith {α : Type} (P : Pool α) (s j : Nat) : Option Nat → Pool α
  | none => P
  | some b => pushIfUnref (dropRef P s (setExt (P.table s) j none)) b

/-- Release logical block `j` of `s`. -/
def releaseAt {α : Type} (P : Pool α) (s j : Nat) : Pool α :=
  releaseWith P s j (getSlot (P.table s) j)

/-- The freeing rule for logical block `j` of `s`: release it if every position it covers is
below `len s - W + 1`, the oldest the next query needs (`Eligible`, without subtraction). -/
def ruleStep {α : Type} (W B s : Nat) (P : Pool α) (j : Nat) : Pool α :=
  if B * j + B + W ≤ P.len s + 1 then releaseAt P s j else P

/-- The freeing rule, eagerly, over every logical block of `s` in order. -/
def rule {α : Type} (W B s : Nat) (P : Pool α) : Pool α :=
  (natsFrom 0 (P.table s).length).foldl (ruleStep W B s) P

/-- A placed entry counts (`bump`), then the rule runs. -/
def afterPlace {α : Type} (W B s : Nat) : Option (Pool α) → Option (Pool α)
  | none => none
  | some P1 => some (rule W B s (bump P1 s))

/-- `append(s, pos, x)`: `none` unless `s` is live and `pos = len s`; else `x` goes to slot
`pos % B` of logical block `pos / B`, the length grows, the rule runs. -/
def appendTok {α : Type} (W B : Nat) (P : Pool α) (s pos : Nat) (x : α) : Option (Pool α) :=
  if memN s P.live = true ∧ pos = P.len s then
    afterPlace W B s (placeWith P s (pos / B) (pos % B) x (getSlot (P.table s) (pos / B)))
  else none

/-- The appends of a chunk in order; `none` if any of them fails. -/
def chunkFrom {α : Type} (W B s : Nat) : Pool α → Nat → List α → Option (Pool α)
  | P, _, [] => some P
  | P, pos, x :: xs => bindO (appendTok W B P s pos x) (fun P1 => chunkFrom W B s P1 (pos + 1) xs)

/-- `append_chunk(s, xs)` at position `pos`: `none` unless `s` is live and `pos = len s` (an
empty chunk included); else `chunkFrom`, atomic: if one append fails, nothing changes. -/
def appendChunk {α : Type} (W B s : Nat) (P : Pool α) (pos : Nat) (xs : List α) :
    Option (Pool α) :=
  if memN s P.live = true ∧ pos = P.len s then chunkFrom W B s P pos xs else none

/-! ## Sequences -/

/-- `add(s)`: a new sequence of length 0, empty table, identity 0. -/
def addSeq {α : Type} (P : Pool α) (s : Nat) : Option (Pool α) :=
  if memN s P.live = true then none
  else some { P with live := s :: P.live, table := upd P.table s [], len := upd P.len s 0,
                     ident := upd P.ident s 0 }

/-- `fork(src, dst)`: `dst` gets `src`'s length, identity and table, sharing every block (each
gets one more reference, since refcounts count table entries). Needs no block. -/
def forkSeq {α : Type} (P : Pool α) (src dst : Nat) : Option (Pool α) :=
  if memN src P.live = true ∧ ¬ memN dst P.live = true then
    some { P with live := dst :: P.live, table := upd P.table dst (P.table src),
                  len := upd P.len dst (P.len src), ident := upd P.ident dst (P.ident src) }
  else none

/-- `s`'s table loses its first entry `o` (its table becomes `rest`); `o`'s block is freed if
that was its last reference. -/
def dropHead {α : Type} (P : Pool α) (s : Nat) : Option Nat → List (Option Nat) → Pool α
  | none, rest => dropRef P s rest
  | some b, rest => pushIfUnref (dropRef P s rest) b

/-- Release every entry of `s`'s table, in logical order. -/
def dropAll {α : Type} : Pool α → Nat → List (Option Nat) → Pool α
  | P, _, [] => P
  | P, s, o :: rest => dropAll (dropHead P s o rest) s rest

/-- `s` leaves the live list. -/
def unlive {α : Type} (P : Pool α) (s : Nat) : Pool α :=
  { P with live := P.live.filter (fun t => decide (¬ t = s)) }

/-- `free(s)`: every block of `s` loses a reference (freed at none left), then `s` is gone. -/
def freeSeq {α : Type} (P : Pool α) (s : Nat) : Option (Pool α) :=
  if memN s P.live = true then some (unlive (dropAll P s (P.table s)) s) else none

/-- A prefix hit: `s` starts at length `L` with the table `tbl` the cache picked; the blocks of
`tbl` leave the free list (their refcount becomes ≥ 1). `paged_hit_valid` says when it is
usable. -/
def admitHit {α : Type} (P : Pool α) (s idt L : Nat) (tbl : List (Option Nat)) : Pool α :=
  { P with live := s :: P.live, table := upd P.table s tbl, len := upd P.len s L,
           ident := upd P.ident s idt, free := P.free.filter (fun b => decide (countIn b tbl = 0)) }

/-! ## Ops and histories -/

/-- The ops of the paged protocol (a prefix hit, `admitHit`, is the subject of `paged_hit_valid`). -/
inductive Op (α : Type) where
  | add (s : Nat)
  | append (s pos : Nat) (x : α)
  | chunk (s pos : Nat) (xs : List α)
  | fork (src dst : Nat)
  | free (s : Nat)

/-- Run one op (`none`: it failed, and the caller keeps the old pool). -/
def Op.apply {α : Type} (W B : Nat) (P : Pool α) : Op α → Option (Pool α)
  | .add s => addSeq P s
  | .append s pos x => appendTok W B P s pos x
  | .chunk s pos xs => appendChunk W B s P pos xs
  | .fork src dst => forkSeq P src dst
  | .free s => freeSeq P s

/-- What a successful op does to the histories (the spec's side, independent of the pool). -/
def Op.hist {α : Type} (H : Nat → List α) : Op α → Nat → List α
  | .add s => upd H s []
  | .append s _ x => upd H s (H s ++ [x])
  | .chunk s _ xs => upd H s (H s ++ xs)
  | .fork src dst => upd H dst (H src)
  | .free s => upd H s []

/-- The one sequence an op may change (`dst` for a fork). -/
def Op.target {α : Type} : Op α → Nat
  | .add s => s
  | .append s _ _ => s
  | .chunk s _ _ => s
  | .fork _ dst => dst
  | .free s => s

/-- The pool and histories after an op whose result is the last argument. -/
def afterOp {α : Type} (P : Pool α) (H : Nat → List α) (o : Op α) :
    Option (Pool α) → Pool α × (Nat → List α)
  | none => (P, H)
  | some P' => (P', Op.hist H o)

/-- Run ops in order; a failed op changes neither the pool nor the histories. -/
def runOps {α : Type} (W B : Nat) : Pool α → (Nat → List α) → List (Op α) → Pool α × (Nat → List α)
  | P, H, [] => (P, H)
  | P, H, o :: os =>
    runOps W B (afterOp P H o (Op.apply W B P o)).1 (afterOp P H o (Op.apply W B P o)).2 os

/-! ## What a sequence reads -/

/-- Slot `i` of the block an entry names (`none` if the entry is `none`). -/
def lookupIn {α : Type} (m : Nat → Nat → Option α) (i : Nat) : Option Nat → Option α
  | none => none
  | some b => m b i

/-- Position `p` of `s`, read through its table. -/
def lookup {α : Type} (P : Pool α) (B s p : Nat) : Option α :=
  lookupIn P.mem (p % B) (getSlot (P.table s) (p / B))

/-- Positions `len s - (W-1) .. len s - 1`, each read through the table. -/
def readSlots {α : Type} (W B : Nat) (P : Pool α) (s : Nat) : List (Option α) :=
  (natsFrom (P.len s - (W - 1)) (min (W - 1) (P.len s))).map (lookup P B s)

/-- What the next query of `s` attends to besides itself (`paged_read_window`: `lastWindow
(W-1)` of its history). -/
def readSeq {α : Type} (W B : Nat) (P : Pool α) (s : Nat) : List α :=
  somes (readSlots W B P s)

/-! ## The invariant -/

/-- The query at position `n` attends to position `q` besides itself. -/
def Needed (W n q : Nat) : Prop := q < n ∧ n < q + W

/-- The freeing rule's condition for logical block `j` at length `n`: `(j+1)·B ≤ n - W + 1`,
written without subtraction. -/
def Eligible (W B n j : Nat) : Prop := B * j + B + W ≤ n + 1

/-- Sequence `t` holds its history `H t`: the lengths agree, and every position its next query
needs lies in a block of its table that holds that position's entry. -/
def Content {α : Type} (W B : Nat) (P : Pool α) (H : Nat → List α) (t : Nat) : Prop :=
  (H t).length = P.len t ∧
    ∀ q, q < P.len t → P.len t < q + W →
      ∃ b, getSlot (P.table t) (q / B) = some b ∧ P.mem b (q % B) = nthOpt (H t) q

/-- No block twice on the free list, and a block is on it iff it is one of the `N` blocks and no
live table references it. -/
def FreeOK {α : Type} (N : Nat) (P : Pool α) : Prop :=
  NoDupL P.free ∧ ∀ b, InL b P.free ↔ (b < N ∧ refcount P b = 0)

/-- Every block a live table references is one of the `N` blocks. -/
def RefsOK {α : Type} (N : Nat) (P : Pool α) : Prop :=
  ∀ t, InL t P.live → ∀ j b, getSlot (P.table t) j = some b → b < N

/-- Well formed: live sequences distinct, free list right, references in range. -/
def PoolWF {α : Type} (N : Nat) (P : Pool α) : Prop :=
  NoDupL P.live ∧ FreeOK N P ∧ RefsOK N P

/-- The simulation relation: the pool is well formed and holds every live history. -/
def PoolHolds {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α) : Prop :=
  PoolWF N P ∧ ∀ t, InL t P.live → Content W B P H t

/-- A prefix hit of length `L` with table `tbl` is valid for `prompt`: every position
`max(0, L-W+1) .. L-1` lies in a block of `tbl` holding the prompt's entry there (blocks before
may be anything, `none` included). -/
def HitValid {α : Type} (W B : Nat) (P : Pool α) (prompt : List α) (L : Nat)
    (tbl : List (Option Nat)) : Prop :=
  ∀ q, q < L → L < q + W → ∃ b, getSlot tbl (q / B) = some b ∧ P.mem b (q % B) = nthOpt prompt q

end KVWindow
