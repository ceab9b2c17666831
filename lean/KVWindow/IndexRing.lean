import KVWindow.Window
import KVWindow.Positions
import KVWindow.Attention

/-!
# KVWindow.IndexRing: the ring `csrc/ringkv.c` and the CUDA kernels ship

`csrc/ringkv_index.h` keeps no head and no fill counter: the state is the window `w`,
the number of tokens seen `n`, and the slots; every index is a function of `n`. This
file mirrors each function of that header by name, over `Nat` (the header's
preconditions, `w ≥ 1` and non-negative arguments, become hypotheses), and proves:

* each index function is in range, and the maps logical index → slot
  (`rkv_logical_slot`) and slot → position (`rkv_slot_pos`) invert each other;
* the ring itself (`IndexRing`: `push` writes slot `n % w`; `pushChunk` writes only
  the last `min k w` entries of a `k`-token chunk, as `ringkv_push_chunk` does) keeps
  the simulation relation `IndexRing.Holds`: one push is one `step`, one chunk of any
  length is one `pushChunk` (`index_push_simulates_step`, `index_pushChunk_simulates`);
* reading the slots in logical order gives `lastWindow w history`, whatever the slots
  held before (`index_read_lastWindow`, `index_run_correct`): garbage is never read;
* for entries with positions, slot `p % w` holds the entry of position `p`, and the
  header's `rkv_slot_pos` names it (`index_slot_eq_pos_mod`, `index_slot_pos_correct`).

The Python mirror is `pyspec/index_ring.py`.
-/

namespace KVWindow

open KVList KVArith

/-! ## The functions of `csrc/ringkv_index.h` -/

/-- `rkv_slot(pos, w)`: the slot of absolute position `pos`. -/
def rkv_slot (pos w : Nat) : Nat := pos % w

/-- `rkv_len(n, w)`: filled slots after `n` tokens, `n < w ? n : w`. -/
def rkv_len (n w : Nat) : Nat := if n < w then n else w

/-- `rkv_oldest(n, w)`: the position of the oldest cached entry after `n` tokens. -/
def rkv_oldest (n w : Nat) : Nat := n - rkv_len n w

/-- `rkv_logical_slot(n, w, i)`: the slot holding logical index `i` (0 = oldest). -/
def rkv_logical_slot (n w i : Nat) : Nat := rkv_slot (rkv_oldest n w + i) w

/-- `rkv_chunk_first_kept(k, w)`: the first entry of a `k`-token chunk that survives,
`k > w ? k - w : 0`. -/
def rkv_chunk_first_kept (k w : Nat) : Nat := if k > w then k - w else 0

/-- `rkv_in_window(w, t, p)`: `p <= t && t < p + w`. -/
def rkv_in_window (w t p : Nat) : Bool := decide (p ≤ t ∧ t < p + w)

/-- `rkv_chunk_kept(k, w)`: how many entries appending a `k`-token chunk writes. -/
def rkv_chunk_kept (k w : Nat) : Nat := rkv_len k w

/-- `rkv_chunk_src(k, w, i)`: the chunk entry the `i`-th write copies. -/
def rkv_chunk_src (k w i : Nat) : Nat := rkv_chunk_first_kept k w + i

/-- `rkv_chunk_dst(pos0, k, w, i)`: the slot the `i`-th write of a chunk starting at
position `pos0` goes to. -/
def rkv_chunk_dst (pos0 k w i : Nat) : Nat := rkv_slot (pos0 + rkv_chunk_src k w i) w

/-- `rkv_slot_valid(n, w, s)`: slot `s` holds a cached entry after `n` tokens. -/
def rkv_slot_valid (n w s : Nat) : Bool := decide (s < rkv_len n w)

/-- `rkv_slot_pos(n, w, s)`: the position a valid slot holds. The C computes
`o + (s - rkv_slot(o, w) + w) % w` in signed arithmetic; over `Nat` the same value is
`o + (s + w - rkv_slot(o, w)) % w`, since `rkv_slot(o, w) < w` (no truncation). -/
def rkv_slot_pos (n w s : Nat) : Nat :=
  rkv_oldest n w + (s + w - rkv_slot (rkv_oldest n w) w) % w

/-- The header's local `per` in `rkv_split_range`: `(len + nsplit - 1) / nsplit`. -/
def splitPer (len nsplit : Nat) : Nat := (len + nsplit - 1) / nsplit

/-- `rkv_split_range(len, nsplit, j, &lo, &hi)`: the slots `[lo, hi)` split `j` reads. -/
def rkv_split_range (len nsplit j : Nat) : Nat × Nat :=
  (if j * splitPer len nsplit < len then j * splitPer len nsplit else len,
   if j * splitPer len nsplit + splitPer len nsplit < len then
     j * splitPer len nsplit + splitPer len nsplit else len)

/-- `rkv_cache_row(b, l, h, s, L, hkv, w)`: the row of slot `s` of KV head `h`, layer `l`,
sequence `b` in a cache laid out `[B][L][Hkv][W][D]`. -/
def rkv_cache_row (b l h s L hkv w : Nat) : Nat := ((b * L + l) * hkv + h) * w + s

/-! ## Unfoldings -/

theorem rkv_len_of_lt (n w : Nat) (h : n < w) : rkv_len n w = n := by
  unfold rkv_len
  exact ite_pos' h _ _

theorem rkv_len_of_ge (n w : Nat) (h : ¬ n < w) : rkv_len n w = w := by
  unfold rkv_len
  exact ite_neg' h _ _

theorem rkv_chunk_first_kept_eq (k w : Nat) : rkv_chunk_first_kept k w = k - min k w := by
  by_cases h : k > w
  · have e : rkv_chunk_first_kept k w = k - w := by
      unfold rkv_chunk_first_kept
      exact ite_pos' h _ _
    omega
  · have e : rkv_chunk_first_kept k w = 0 := by
      unfold rkv_chunk_first_kept
      exact ite_neg' h _ _
    omega

theorem clamp_eq (x len : Nat) : (if x < len then x else len) = min x len := by
  by_cases h : x < len
  · have e := ite_pos' h x len
    omega
  · have e := ite_neg' h x len
    omega

theorem split_lo (len n j : Nat) :
    (rkv_split_range len n j).1 = min (j * splitPer len n) len :=
  clamp_eq (j * splitPer len n) len

theorem split_hi (len n j : Nat) :
    (rkv_split_range len n j).2 = min (j * splitPer len n + splitPer len n) len :=
  clamp_eq (j * splitPer len n + splitPer len n) len

/-! ## Each index function is in range -/

/-- `rkv_slot` is a slot. -/
theorem rkv_slot_lt (p w : Nat) (hw : 0 < w) : rkv_slot p w < w :=
  mod_lt' p hw

/-- `rkv_len` is `min n w` (`lastWindow_length`): never more than `w` slots are read. -/
theorem rkv_len_eq_min (n w : Nat) : rkv_len n w = min n w := by
  by_cases h : n < w
  · have e := rkv_len_of_lt n w h
    omega
  · have e := rkv_len_of_ge n w h
    omega

/-- The cache after `n` tokens is positions `rkv_oldest n w .. n-1`. -/
theorem rkv_oldest_add_len (n w : Nat) : rkv_oldest n w + rkv_len n w = n := by
  have h1 := rkv_len_eq_min n w
  have h2 : rkv_oldest n w = n - rkv_len n w := rfl
  omega

/-- `rkv_logical_slot` is a slot. -/
theorem rkv_logical_slot_lt (n w i : Nat) (hw : 0 < w) : rkv_logical_slot n w i < w :=
  mod_lt' (rkv_oldest n w + i) hw

/-- A chunk writes its last `min k w` entries: the first kept one plus how many are
kept is the chunk length. -/
theorem rkv_chunk_kept_eq (k w : Nat) :
    rkv_chunk_first_kept k w + rkv_chunk_kept k w = k ∧ rkv_chunk_kept k w = min k w := by
  have h1 := rkv_chunk_first_kept_eq k w
  have h2 : rkv_chunk_kept k w = rkv_len k w := rfl
  have h3 := rkv_len_eq_min k w
  exact ⟨by omega, by omega⟩

/-- Every write copies an entry of the chunk, one of its last `w`. -/
theorem rkv_chunk_src_range (k w i : Nat) (hi : i < rkv_chunk_kept k w) :
    rkv_chunk_src k w i < k ∧ k ≤ rkv_chunk_src k w i + w := by
  obtain ⟨h1, h2⟩ := rkv_chunk_kept_eq k w
  have h3 : rkv_chunk_src k w i = rkv_chunk_first_kept k w + i := rfl
  have h4 := rkv_chunk_first_kept_eq k w
  exact ⟨by omega, by omega⟩

/-- Every write goes to a slot, and no two writes of one chunk go to the same slot:
the chunk scatter is race-free. -/
theorem rkv_chunk_dst_inj (pos0 k w i j : Nat) (hw : 0 < w) (hij : i < j)
    (hj : j < rkv_chunk_kept k w) :
    rkv_chunk_dst pos0 k w i < w ∧ rkv_chunk_dst pos0 k w i ≠ rkv_chunk_dst pos0 k w j := by
  obtain ⟨_, h2⟩ := rkv_chunk_kept_eq k w
  have e1 : rkv_chunk_dst pos0 k w i = (pos0 + (rkv_chunk_first_kept k w + i)) % w := rfl
  have e2 : rkv_chunk_dst pos0 k w j = (pos0 + (rkv_chunk_first_kept k w + j)) % w := rfl
  have hne := mod_ne_of_lt (pos0 + (rkv_chunk_first_kept k w + i))
    (pos0 + (rkv_chunk_first_kept k w + j)) w hw (by omega) (by omega)
  have hlt := mod_lt' (pos0 + (rkv_chunk_first_kept k w + i)) hw
  refine ⟨by omega, ?_⟩
  intro heq
  exact hne (e1.symm.trans (heq.trans e2))

/-- `rkv_in_window` is `inWindow`. -/
theorem rkv_in_window_iff (w t p : Nat) : rkv_in_window w t p = true ↔ inWindow w t p := by
  constructor
  · intro h
    have h' : decide (p ≤ t ∧ t < p + w) = true := h
    have h'' : p ≤ t ∧ t < p + w := of_decide_eq_true h'
    exact h''
  · intro h
    have h' : p ≤ t ∧ t < p + w := h
    have h'' : decide (p ≤ t ∧ t < p + w) = true := decide_eq_true h'
    exact h''

/-- The splits of `rkv_split_range` (`nsplit = m + 1 ≥ 1`) are ranges inside `[0, len)`,
each starts where the previous one ends, the first starts at 0 and the last ends at
`len`: together they read every valid slot exactly once. -/
theorem rkv_split_range_partition (len m : Nat) :
    (∀ j, (rkv_split_range len (m + 1) j).1 ≤ (rkv_split_range len (m + 1) j).2 ∧
        (rkv_split_range len (m + 1) j).2 ≤ len) ∧
      (∀ j, (rkv_split_range len (m + 1) j).2 = (rkv_split_range len (m + 1) (j + 1)).1) ∧
      (rkv_split_range len (m + 1) 0).1 = 0 ∧
      (rkv_split_range len (m + 1) m).2 = len := by
  refine ⟨fun j => ?_, fun j => ?_, ?_, ?_⟩
  · have h1 := split_lo len (m + 1) j
    have h2 := split_hi len (m + 1) j
    exact ⟨by omega, by omega⟩
  · have h1 := split_hi len (m + 1) j
    have h2 := split_lo len (m + 1) (j + 1)
    have h3 := succ_mul' j (splitPer len (m + 1))
    omega
  · have h1 := split_lo len (m + 1) 0
    have h2 := zero_mul' (splitPer len (m + 1))
    omega
  · have h1 : (rkv_split_range len (m + 1) m).2 =
        min (m * ((len + (m + 1) - 1) / (m + 1)) + (len + (m + 1) - 1) / (m + 1)) len :=
      split_hi len (m + 1) m
    have h2 := div_add_mod' (len + (m + 1) - 1) (m + 1)
    have h3 := mod_lt' (len + (m + 1) - 1) (show 0 < m + 1 by omega)
    have h4 := succ_mul' m ((len + (m + 1) - 1) / (m + 1))
    omega

/-- The cache layout `[B][L][Hkv][W]` is row-major: the next slot is the next row, and
the row after the last slot of a head, layer or sequence is the first slot of the next
one, starting from row 0. So the rows enumerate `0 .. B·L·Hkv·W - 1` without gaps or
repeats, and the window of one (sequence, layer, head) is contiguous. -/
theorem rkv_cache_row_next (b l h s L hkv w : Nat) :
    rkv_cache_row b l h (s + 1) L hkv w = rkv_cache_row b l h s L hkv w + 1 ∧
      rkv_cache_row b l h w L hkv w = rkv_cache_row b l (h + 1) 0 L hkv w ∧
      rkv_cache_row b l hkv 0 L hkv w = rkv_cache_row b (l + 1) 0 0 L hkv w ∧
      rkv_cache_row b L 0 0 L hkv w = rkv_cache_row (b + 1) 0 0 0 L hkv w ∧
      rkv_cache_row 0 0 0 0 L hkv w = 0 := by
  refine ⟨?_, ?_, ?_, ?_, ?_⟩
  · have r1 : rkv_cache_row b l h (s + 1) L hkv w = ((b * L + l) * hkv + h) * w + (s + 1) := rfl
    have r2 : rkv_cache_row b l h s L hkv w = ((b * L + l) * hkv + h) * w + s := rfl
    omega
  · have r1 : rkv_cache_row b l h w L hkv w = ((b * L + l) * hkv + h) * w + w := rfl
    have r2 : rkv_cache_row b l (h + 1) 0 L hkv w = ((b * L + l) * hkv + (h + 1)) * w + 0 := rfl
    have e1 : (b * L + l) * hkv + (h + 1) = ((b * L + l) * hkv + h) + 1 := by omega
    have e2 : ((b * L + l) * hkv + (h + 1)) * w = (((b * L + l) * hkv + h) + 1) * w :=
      congrArg (fun x => x * w) e1
    have e3 := succ_mul' ((b * L + l) * hkv + h) w
    omega
  · have r1 : rkv_cache_row b l hkv 0 L hkv w = ((b * L + l) * hkv + hkv) * w + 0 := rfl
    have r2 : rkv_cache_row b (l + 1) 0 0 L hkv w = ((b * L + (l + 1)) * hkv + 0) * w + 0 := rfl
    have e1 : (b * L + (l + 1)) * hkv = (b * L + l + 1) * hkv :=
      congrArg (fun x => x * hkv) (show b * L + (l + 1) = b * L + l + 1 by omega)
    have e2 := succ_mul' (b * L + l) hkv
    have e3 : (b * L + (l + 1)) * hkv + 0 = (b * L + l) * hkv + hkv := by omega
    have e4 : ((b * L + (l + 1)) * hkv + 0) * w = ((b * L + l) * hkv + hkv) * w :=
      congrArg (fun x => x * w) e3
    omega
  · have r1 : rkv_cache_row b L 0 0 L hkv w = ((b * L + L) * hkv + 0) * w + 0 := rfl
    have r2 : rkv_cache_row (b + 1) 0 0 0 L hkv w = (((b + 1) * L + 0) * hkv + 0) * w + 0 := rfl
    have e1 := succ_mul' b L
    have e2 : (b + 1) * L + 0 = b * L + L := by omega
    have e3 : (((b + 1) * L + 0) * hkv + 0) * w = ((b * L + L) * hkv + 0) * w :=
      congrArg (fun x => (x * hkv + 0) * w) e2
    omega
  · have r1 : rkv_cache_row 0 0 0 0 L hkv w = ((0 * L + 0) * hkv + 0) * w + 0 := rfl
    have e1 := zero_mul' L
    have e2 : 0 * L + 0 = 0 := by omega
    have e3 : ((0 * L + 0) * hkv + 0) * w = (0 * hkv + 0) * w :=
      congrArg (fun x => (x * hkv + 0) * w) e2
    have e4 := zero_mul' hkv
    have e5 : (0 * hkv + 0) * w = (0 + 0) * w := congrArg (fun x => (x + 0) * w) e4
    have e6 : (0 + 0) * w = 0 * w := congrArg (fun x => x * w) (show (0 : Nat) + 0 = 0 by omega)
    have e7 := zero_mul' w
    omega

/-! ## Logical index → slot and slot → position invert each other -/

/-- Reading logical index `i < w`, the header names position `oldest + i`. -/
theorem rkv_slot_pos_logical_slot (n w i : Nat) (hw : 0 < w) (hi : i < w) :
    rkv_slot_pos n w (rkv_logical_slot n w i) = rkv_oldest n w + i := by
  have h := window_offset (rkv_oldest n w) i w hw hi
  calc rkv_slot_pos n w (rkv_logical_slot n w i)
      = rkv_oldest n w + ((rkv_oldest n w + i) % w + w - rkv_oldest n w % w) % w := rfl
    _ = rkv_oldest n w + i := by rw [h]

/-- Every slot `s < w` names a position of the window `[oldest, oldest + w)`, and that
position's logical index maps back to slot `s`. -/
theorem rkv_slot_pos_inverse (n w s : Nat) (hw : 0 < w) (hs : s < w) :
    rkv_oldest n w ≤ rkv_slot_pos n w s ∧ rkv_slot_pos n w s < rkv_oldest n w + w ∧
      rkv_logical_slot n w (rkv_slot_pos n w s - rkv_oldest n w) = s := by
  have hd := mod_lt' (s + w - rkv_oldest n w % w) hw
  have hpos : rkv_slot_pos n w s = rkv_oldest n w + (s + w - rkv_oldest n w % w) % w := rfl
  refine ⟨by omega, by omega, ?_⟩
  have e1 : rkv_slot_pos n w s - rkv_oldest n w = (s + w - rkv_oldest n w % w) % w := by omega
  calc rkv_logical_slot n w (rkv_slot_pos n w s - rkv_oldest n w)
      = (rkv_oldest n w + (rkv_slot_pos n w s - rkv_oldest n w)) % w := rfl
    _ = (rkv_oldest n w + (s + w - rkv_oldest n w % w) % w) % w := by rw [e1]
    _ = s := slot_offset_back (rkv_oldest n w) s w hw hs

/-- A position of the window is named back by the slot it lives in. -/
theorem rkv_slot_pos_slot (n w p : Nat) (hw : 0 < w) (h1 : rkv_oldest n w ≤ p)
    (h2 : p < rkv_oldest n w + w) : rkv_slot_pos n w (rkv_slot p w) = p := by
  have e : rkv_oldest n w + (p - rkv_oldest n w) = p := by omega
  have hls : rkv_logical_slot n w (p - rkv_oldest n w) = rkv_slot p w := by
    calc rkv_logical_slot n w (p - rkv_oldest n w)
        = rkv_slot (rkv_oldest n w + (p - rkv_oldest n w)) w := rfl
      _ = rkv_slot p w := by rw [e]
  have h := rkv_slot_pos_logical_slot n w (p - rkv_oldest n w) hw (by omega)
  calc rkv_slot_pos n w (rkv_slot p w)
      = rkv_slot_pos n w (rkv_logical_slot n w (p - rkv_oldest n w)) :=
        congrArg (rkv_slot_pos n w) hls.symm
    _ = rkv_oldest n w + (p - rkv_oldest n w) := h
    _ = p := e

/-- A slot is valid exactly when the position it names has been seen. -/
theorem rkv_slot_valid_iff (n w s : Nat) (hw : 0 < w) (hs : s < w) :
    rkv_slot_valid n w s = true ↔ rkv_slot_pos n w s < n := by
  have hlen := rkv_len_eq_min n w
  have hold : rkv_oldest n w = n - rkv_len n w := rfl
  have hv : rkv_slot_valid n w s = decide (s < rkv_len n w) := rfl
  obtain ⟨hlo, hhi, hinv⟩ := rkv_slot_pos_inverse n w s hw hs
  have hls : rkv_logical_slot n w (rkv_slot_pos n w s - rkv_oldest n w) =
      (rkv_oldest n w + (rkv_slot_pos n w s - rkv_oldest n w)) % w := rfl
  have key : s < rkv_len n w ↔ rkv_slot_pos n w s < n := by
    by_cases hn : w ≤ n
    · constructor
      · intro _
        omega
      · intro _
        omega
    · have e : rkv_oldest n w + (rkv_slot_pos n w s - rkv_oldest n w) = rkv_slot_pos n w s := by
        omega
      have h3 : (rkv_oldest n w + (rkv_slot_pos n w s - rkv_oldest n w)) % w =
          rkv_slot_pos n w s % w := congrArg (fun x => x % w) e
      have hm := mod_self_lt (rkv_slot_pos n w s) w (by omega)
      constructor
      · intro _
        omega
      · intro _
        omega
  constructor
  · intro hvt
    exact key.1 (of_decide_eq_true (hv.symm.trans hvt))
  · intro hp
    exact hv.trans (decide_eq_true (key.2 hp))

/-! ## The ring -/

/-- The state `csrc/ringkv.c` keeps: the window, the tokens seen, and the slots (a
total function: a slot never written holds whatever it held, as in C). -/
structure IndexRing (α : Type) where
  w : Nat
  n : Nat
  slots : Nat → α

/-- `write_slot`: overwrite slot `s`. -/
def writeSlot {α : Type} (slots : Nat → α) (s : Nat) (e : α) (j : Nat) : α :=
  if j = s then e else slots j

/-- Write consecutive entries starting at position `p` (the loop of `ringkv_push_chunk`). -/
def writeFrom {α : Type} (w : Nat) : (Nat → α) → Nat → List α → (Nat → α)
  | slots, _, [] => slots
  | slots, p, y :: ys => writeFrom w (writeSlot slots (rkv_slot p w) y) (p + 1) ys

/-- `ringkv_reset`: the next position is 0 again; the slots are not cleared. -/
def IndexRing.reset {α : Type} (r : IndexRing α) (w : Nat) : IndexRing α :=
  { w := w, n := 0, slots := r.slots }

/-- `ringkv_push` of the entry at position `n` (the C checks the position first). -/
def IndexRing.push {α : Type} (r : IndexRing α) (e : α) : IndexRing α :=
  { w := r.w, n := r.n + 1, slots := writeSlot r.slots (rkv_slot r.n r.w) e }

/-- `ringkv_push_chunk`: write only entries `rkv_chunk_first_kept .. k-1`, at their
positions. -/
def IndexRing.pushChunk {α : Type} (r : IndexRing α) (ys : List α) : IndexRing α :=
  { w := r.w, n := r.n + ys.length,
    slots := writeFrom r.w r.slots (r.n + rkv_chunk_first_kept ys.length r.w)
      (ys.drop (rkv_chunk_first_kept ys.length r.w)) }

/-- `ringkv_read`: the `rkv_len` valid slots in logical order. -/
def IndexRing.read {α : Type} (r : IndexRing α) : List α :=
  (natsFrom 0 (rkv_len r.n r.w)).map (fun i => r.slots (rkv_logical_slot r.n r.w i))

/-- A stream of pushes from a fresh stream whose slots hold `garbage`. -/
def IndexRing.run {α : Type} (w : Nat) (garbage : Nat → α) (xs : List α) : IndexRing α :=
  xs.foldl IndexRing.push { w := w, n := 0, slots := garbage }

/-- The simulation relation: `r` is the window `w` after the history `hs`; every
position still cached sits in its slot. -/
def IndexRing.Holds {α : Type} (w : Nat) (hs : List α) (r : IndexRing α) : Prop :=
  r.w = w ∧ r.n = hs.length ∧
    ∀ p, rkv_oldest hs.length w ≤ p → p < hs.length → nthOpt hs p = some (r.slots (rkv_slot p w))

theorem writeSlot_same {α : Type} (slots : Nat → α) (s j : Nat) (e : α) (h : j = s) :
    writeSlot slots s e j = e :=
  (rfl : writeSlot slots s e j = (if j = s then e else slots j)).trans (ite_pos' h e (slots j))

theorem writeSlot_ne {α : Type} (slots : Nat → α) (s j : Nat) (e : α) (h : ¬ j = s) :
    writeSlot slots s e j = slots j :=
  (rfl : writeSlot slots s e j = (if j = s then e else slots j)).trans (ite_neg' h e (slots j))

/-- A slot no write of the chunk touches keeps its value. -/
theorem writeFrom_other {α : Type} (w : Nat) :
    ∀ (ys : List α) (slots : Nat → α) (p j : Nat),
      (∀ i, i < ys.length → rkv_slot (p + i) w ≠ j) → writeFrom w slots p ys j = slots j
  | [], _, _, _, _ => rfl
  | y :: ys, slots, p, j, h => by
    have hlen : (y :: ys).length = ys.length + 1 := rfl
    have h0 : rkv_slot (p + 0) w ≠ j := h 0 (by omega)
    have hrest : ∀ i, i < ys.length → rkv_slot (p + 1 + i) w ≠ j := by
      intro i hi heq
      have e1 : p + 1 + i = p + (i + 1) := by omega
      have heq' : rkv_slot (p + (i + 1)) w = j := by
        calc rkv_slot (p + (i + 1)) w = rkv_slot (p + 1 + i) w := by rw [e1]
          _ = j := heq
      exact h (i + 1) (by omega) heq'
    have ih := writeFrom_other w ys (writeSlot slots (rkv_slot p w) y) (p + 1) j hrest
    calc writeFrom w slots p (y :: ys) j
        = writeFrom w (writeSlot slots (rkv_slot p w) y) (p + 1) ys j := rfl
      _ = writeSlot slots (rkv_slot p w) y j := ih
      _ = slots j := writeSlot_ne slots (rkv_slot p w) j y (fun hj => h0 hj.symm)

/-- Within one chunk of at most `w` entries, entry `i` is read back from the slot of
its position. -/
theorem writeFrom_hit {α : Type} (w : Nat) (hw : 0 < w) :
    ∀ (ys : List α) (slots : Nat → α) (p i : Nat), ys.length ≤ w → i < ys.length →
      nthOpt ys i = some (writeFrom w slots p ys (rkv_slot (p + i) w))
  | [], _, _, i, _, hi => by
    have e : ([] : List α).length = 0 := rfl
    exact False.elim (by omega)
  | y :: ys, slots, p, 0, hlen, _ => by
    have e : (y :: ys).length = ys.length + 1 := rfl
    have hother : ∀ i, i < ys.length → rkv_slot (p + 1 + i) w ≠ rkv_slot (p + 0) w := by
      intro i hi heq
      have hne := mod_ne_of_lt p (p + 1 + i) w hw (by omega) (by omega)
      exact hne heq.symm
    have h1 := writeFrom_other w ys (writeSlot slots (rkv_slot p w) y) (p + 1)
      (rkv_slot (p + 0) w) hother
    have hsame : writeSlot slots (rkv_slot p w) y (rkv_slot (p + 0) w) = y :=
      writeSlot_same slots (rkv_slot p w) (rkv_slot (p + 0) w) y rfl
    calc nthOpt (y :: ys) 0 = some y := rfl
      _ = some (writeSlot slots (rkv_slot p w) y (rkv_slot (p + 0) w)) := congrArg some hsame.symm
      _ = some (writeFrom w (writeSlot slots (rkv_slot p w) y) (p + 1) ys (rkv_slot (p + 0) w)) :=
          congrArg some h1.symm
      _ = some (writeFrom w slots p (y :: ys) (rkv_slot (p + 0) w)) := rfl
  | y :: ys, slots, p, i + 1, hlen, hi => by
    have e : (y :: ys).length = ys.length + 1 := rfl
    have e1 : p + 1 + i = p + (i + 1) := by omega
    have ih := writeFrom_hit w hw ys (writeSlot slots (rkv_slot p w) y) (p + 1) i (by omega) (by omega)
    calc nthOpt (y :: ys) (i + 1) = nthOpt ys i := rfl
      _ = some (writeFrom w (writeSlot slots (rkv_slot p w) y) (p + 1) ys (rkv_slot (p + 1 + i) w)) := ih
      _ = some (writeFrom w slots p (y :: ys) (rkv_slot (p + 1 + i) w)) := rfl
      _ = some (writeFrom w slots p (y :: ys) (rkv_slot (p + (i + 1)) w)) := by rw [e1]

/-- A fresh stream holds the empty history, whatever its slots hold. -/
theorem holds_init {α : Type} (w : Nat) (g : Nat → α) :
    IndexRing.Holds w ([] : List α) { w := w, n := 0, slots := g } := by
  unfold IndexRing.Holds
  refine ⟨rfl, rfl, ?_⟩
  intro p _ hp
  have e : ([] : List α).length = 0 := rfl
  exact False.elim (by omega)

/-- Reading the slots in logical order gives the window of the history. -/
theorem index_read_lastWindow {α : Type} (w : Nat) (hw : 0 < w) (hs : List α) (r : IndexRing α)
    (h : IndexRing.Holds w hs r) : r.read = lastWindow w hs := by
  unfold IndexRing.Holds at h
  obtain ⟨hrw, hrn, hslots⟩ := h
  have hl := rkv_len_eq_min hs.length w
  have ho : rkv_oldest hs.length w = hs.length - rkv_len hs.length w := rfl
  have hlw := lastWindow_length w hs
  have hread : r.read = (natsFrom 0 (lastWindow w hs).length).map
      (fun i => r.slots (rkv_logical_slot hs.length w i)) := by
    have e : rkv_len r.n r.w = (lastWindow w hs).length := by
      have h1 := rkv_len_eq_min r.n r.w
      omega
    calc r.read = (natsFrom 0 (rkv_len r.n r.w)).map
          (fun i => r.slots (rkv_logical_slot r.n r.w i)) := rfl
      _ = (natsFrom 0 (lastWindow w hs).length).map
          (fun i => r.slots (rkv_logical_slot hs.length w i)) := by
        first
        | (rw [e, hrn, hrw]; done)
        | (simp only [e, hrn, hrw]; done)
  rw [hread]
  refine map_natsFrom_of_nthOpt (fun i => r.slots (rkv_logical_slot hs.length w i))
    (lastWindow w hs) 0 (fun i hi => ?_)
  have hp1 : rkv_oldest hs.length w ≤ hs.length - w + i := by omega
  have hp2 : hs.length - w + i < hs.length := by omega
  have e1 : rkv_logical_slot hs.length w (0 + i) = rkv_slot (hs.length - w + i) w := by
    have e2 : rkv_oldest hs.length w + (0 + i) = hs.length - w + i := by omega
    calc rkv_logical_slot hs.length w (0 + i)
        = rkv_slot (rkv_oldest hs.length w + (0 + i)) w := rfl
      _ = rkv_slot (hs.length - w + i) w := by rw [e2]
  calc nthOpt (lastWindow w hs) i = nthOpt hs (hs.length - w + i) :=
        nthOpt_drop hs (hs.length - w) i
    _ = some (r.slots (rkv_slot (hs.length - w + i) w)) := hslots _ hp1 hp2
    _ = some (r.slots (rkv_logical_slot hs.length w (0 + i))) := by rw [e1]

/-- One push keeps the simulation relation. -/
theorem holds_push {α : Type} (w : Nat) (hw : 0 < w) (hs : List α) (r : IndexRing α) (e : α)
    (h : IndexRing.Holds w hs r) : IndexRing.Holds w (hs ++ [e]) (r.push e) := by
  unfold IndexRing.Holds at h ⊢
  obtain ⟨hrw, hrn, hslots⟩ := h
  have hlen := length_append_singleton hs e
  have hl1 := rkv_len_eq_min hs.length w
  have hl2 := rkv_len_eq_min (hs ++ [e]).length w
  have ho1 : rkv_oldest hs.length w = hs.length - rkv_len hs.length w := rfl
  have ho2 : rkv_oldest (hs ++ [e]).length w =
      (hs ++ [e]).length - rkv_len (hs ++ [e]).length w := rfl
  have hn : (r.push e).n = r.n + 1 := rfl
  refine ⟨hrw, by omega, ?_⟩
  intro p hp1 hp2
  have hslotw : (r.push e).slots = writeSlot r.slots (rkv_slot hs.length w) e := by
    calc (r.push e).slots = writeSlot r.slots (rkv_slot r.n r.w) e := rfl
      _ = writeSlot r.slots (rkv_slot hs.length w) e := by rw [hrn, hrw]
  have hread : writeSlot r.slots (rkv_slot hs.length w) e (rkv_slot p w) =
      (r.push e).slots (rkv_slot p w) :=
    congrArg (fun f => f (rkv_slot p w)) hslotw.symm
  by_cases hpn : p = hs.length
  · have h1 : nthOpt (hs ++ [e]) p = some e :=
      (congrArg (nthOpt (hs ++ [e])) hpn).trans (nthOpt_append_len hs e)
    have h2 : writeSlot r.slots (rkv_slot hs.length w) e (rkv_slot p w) = e :=
      writeSlot_same _ _ _ e (congrArg (fun q => rkv_slot q w) hpn)
    calc nthOpt (hs ++ [e]) p = some e := h1
      _ = some (writeSlot r.slots (rkv_slot hs.length w) e (rkv_slot p w)) := congrArg some h2.symm
      _ = some ((r.push e).slots (rkv_slot p w)) := congrArg some hread
  · have hp3 : p < hs.length := by omega
    have h1 : nthOpt (hs ++ [e]) p = nthOpt hs p := nthOpt_append_lt hs [e] p hp3
    have hne : ¬ rkv_slot p w = rkv_slot hs.length w :=
      mod_ne_of_lt p hs.length w hw hp3 (by omega)
    have h2 : writeSlot r.slots (rkv_slot hs.length w) e (rkv_slot p w) = r.slots (rkv_slot p w) :=
      writeSlot_ne _ _ _ e hne
    calc nthOpt (hs ++ [e]) p = nthOpt hs p := h1
      _ = some (r.slots (rkv_slot p w)) := hslots p (by omega) hp3
      _ = some (writeSlot r.slots (rkv_slot hs.length w) e (rkv_slot p w)) := congrArg some h2.symm
      _ = some ((r.push e).slots (rkv_slot p w)) := congrArg some hread

/-- One chunk of any length keeps the simulation relation, although only its last
`min k w` entries are written. -/
theorem holds_pushChunk {α : Type} (w : Nat) (hw : 0 < w) (hs ys : List α) (r : IndexRing α)
    (h : IndexRing.Holds w hs r) : IndexRing.Holds w (hs ++ ys) (r.pushChunk ys) := by
  unfold IndexRing.Holds at h ⊢
  obtain ⟨hrw, hrn, hslots⟩ := h
  have hlen := length_append' hs ys
  have hf := rkv_chunk_first_kept_eq ys.length w
  have hdl := length_drop' (rkv_chunk_first_kept ys.length w) ys
  have hl1 := rkv_len_eq_min hs.length w
  have hl2 := rkv_len_eq_min (hs ++ ys).length w
  have ho1 : rkv_oldest hs.length w = hs.length - rkv_len hs.length w := rfl
  have ho2 : rkv_oldest (hs ++ ys).length w =
      (hs ++ ys).length - rkv_len (hs ++ ys).length w := rfl
  have hn : (r.pushChunk ys).n = r.n + ys.length := rfl
  have hslots' : (r.pushChunk ys).slots =
      writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
        (ys.drop (rkv_chunk_first_kept ys.length w)) := by
    calc (r.pushChunk ys).slots
        = writeFrom r.w r.slots (r.n + rkv_chunk_first_kept ys.length r.w)
            (ys.drop (rkv_chunk_first_kept ys.length r.w)) := rfl
      _ = writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
            (ys.drop (rkv_chunk_first_kept ys.length w)) := by rw [hrn, hrw]
  refine ⟨hrw, by omega, ?_⟩
  intro p hp1 hp2
  have hread : writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
        (ys.drop (rkv_chunk_first_kept ys.length w)) (rkv_slot p w) =
      (r.pushChunk ys).slots (rkv_slot p w) :=
    congrArg (fun f => f (rkv_slot p w)) hslots'.symm
  refine Eq.trans ?_ (congrArg some hread)
  by_cases hnew : hs.length + rkv_chunk_first_kept ys.length w ≤ p
  · -- written by the chunk
    have hi : p - (hs.length + rkv_chunk_first_kept ys.length w) <
        (ys.drop (rkv_chunk_first_kept ys.length w)).length := by omega
    have hkw : (ys.drop (rkv_chunk_first_kept ys.length w)).length ≤ w := by omega
    have hhit := writeFrom_hit w hw (ys.drop (rkv_chunk_first_kept ys.length w)) r.slots
      (hs.length + rkv_chunk_first_kept ys.length w)
      (p - (hs.length + rkv_chunk_first_kept ys.length w)) hkw hi
    have e1 : hs.length + rkv_chunk_first_kept ys.length w +
        (p - (hs.length + rkv_chunk_first_kept ys.length w)) = p := by omega
    have e2 : hs.length + (rkv_chunk_first_kept ys.length w +
        (p - (hs.length + rkv_chunk_first_kept ys.length w))) = p := by omega
    have hn1 : nthOpt (ys.drop (rkv_chunk_first_kept ys.length w))
        (p - (hs.length + rkv_chunk_first_kept ys.length w)) =
        nthOpt ys (rkv_chunk_first_kept ys.length w +
          (p - (hs.length + rkv_chunk_first_kept ys.length w))) :=
      nthOpt_drop ys _ _
    have hn2 : nthOpt (hs ++ ys) (hs.length + (rkv_chunk_first_kept ys.length w +
        (p - (hs.length + rkv_chunk_first_kept ys.length w)))) =
        nthOpt ys (rkv_chunk_first_kept ys.length w +
          (p - (hs.length + rkv_chunk_first_kept ys.length w))) :=
      nthOpt_append_right hs ys _
    calc nthOpt (hs ++ ys) p
        = nthOpt (hs ++ ys) (hs.length + (rkv_chunk_first_kept ys.length w +
            (p - (hs.length + rkv_chunk_first_kept ys.length w)))) :=
          congrArg (nthOpt (hs ++ ys)) e2.symm
      _ = nthOpt ys (rkv_chunk_first_kept ys.length w +
            (p - (hs.length + rkv_chunk_first_kept ys.length w))) := hn2
      _ = nthOpt (ys.drop (rkv_chunk_first_kept ys.length w))
            (p - (hs.length + rkv_chunk_first_kept ys.length w)) := hn1.symm
      _ = some (writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
            (ys.drop (rkv_chunk_first_kept ys.length w))
            (rkv_slot (hs.length + rkv_chunk_first_kept ys.length w +
              (p - (hs.length + rkv_chunk_first_kept ys.length w))) w)) := hhit
      _ = some (writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
            (ys.drop (rkv_chunk_first_kept ys.length w)) (rkv_slot p w)) :=
          congrArg (fun q => some (writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
            (ys.drop (rkv_chunk_first_kept ys.length w)) (rkv_slot q w))) e1
  · -- not written: only when the chunk fits in the window, and then `p` is an old position
    have hf0 : rkv_chunk_first_kept ys.length w = 0 := by omega
    have hp3 : p < hs.length := by omega
    have hother : ∀ i, i < (ys.drop (rkv_chunk_first_kept ys.length w)).length →
        rkv_slot (hs.length + rkv_chunk_first_kept ys.length w + i) w ≠ rkv_slot p w := by
      intro i hi heq
      have hne := mod_ne_of_lt p (hs.length + rkv_chunk_first_kept ys.length w + i) w hw
        (by omega) (by omega)
      exact hne heq.symm
    have hkeep := writeFrom_other w _ r.slots _ (rkv_slot p w) hother
    calc nthOpt (hs ++ ys) p = nthOpt hs p := nthOpt_append_lt hs ys p hp3
      _ = some (r.slots (rkv_slot p w)) := hslots p (by omega) hp3
      _ = some (writeFrom w r.slots (hs.length + rkv_chunk_first_kept ys.length w)
            (ys.drop (rkv_chunk_first_kept ys.length w)) (rkv_slot p w)) := congrArg some hkeep.symm

theorem holds_foldl {α : Type} (w : Nat) (hw : 0 < w) :
    ∀ (xs hs : List α) (r : IndexRing α), IndexRing.Holds w hs r →
      IndexRing.Holds w (hs ++ xs) (xs.foldl IndexRing.push r)
  | [], hs, r, h => by
    have e : hs ++ [] = hs := append_nil' hs
    rw [e]
    exact h
  | x :: xs, hs, r, h => by
    have h1 := holds_push w hw hs r x h
    have h2 := holds_foldl w hw xs (hs ++ [x]) (r.push x) h1
    have e : hs ++ [x] ++ xs = hs ++ (x :: xs) := append_singleton_cons hs x xs
    rw [e] at h2
    exact h2

/-! ## The simulation theorems -/

/-- One push of the shipped ring is one list-model `step`, and keeps the relation. -/
theorem index_push_simulates_step {α : Type} (w : Nat) (hw : 0 < w) (hs : List α)
    (r : IndexRing α) (e : α) (h : IndexRing.Holds w hs r) :
    (r.push e).read = step w r.read e ∧ IndexRing.Holds w (hs ++ [e]) (r.push e) := by
  have h' := holds_push w hw hs r e h
  refine ⟨?_, h'⟩
  calc (r.push e).read = lastWindow w (hs ++ [e]) := index_read_lastWindow w hw (hs ++ [e]) _ h'
    _ = step w (lastWindow w hs) e := (step_lastWindow w hs e).symm
    _ = step w r.read e := by rw [index_read_lastWindow w hw hs r h]

/-- One chunk of any length (also longer than `w`) of the shipped ring is one list-model
`pushChunk`, and keeps the relation. -/
theorem index_pushChunk_simulates {α : Type} (w : Nat) (hw : 0 < w) (hs ys : List α)
    (r : IndexRing α) (h : IndexRing.Holds w hs r) :
    (r.pushChunk ys).read = pushChunk w r.read ys ∧
      IndexRing.Holds w (hs ++ ys) (r.pushChunk ys) := by
  have h' := holds_pushChunk w hw hs ys r h
  refine ⟨?_, h'⟩
  calc (r.pushChunk ys).read = lastWindow w (hs ++ ys) :=
        index_read_lastWindow w hw (hs ++ ys) _ h'
    _ = pushChunk w (lastWindow w hs) ys := (pushChunk_correct w hs ys).symm
    _ = pushChunk w r.read ys := by rw [index_read_lastWindow w hw hs r h]

/-- A whole stream through the shipped ring reads back as the spec's window, whatever
the slots held before the stream began. -/
theorem index_run_correct {α : Type} (w : Nat) (hw : 0 < w) (g : Nat → α) (xs : List α) :
    (IndexRing.run w g xs).read = lastWindow w xs := by
  have h := holds_foldl w hw xs [] { w := w, n := 0, slots := g } (holds_init w g)
  have e : ([] : List α) ++ xs = xs := rfl
  rw [e] at h
  exact index_read_lastWindow w hw xs _ h

/-- Entries with positions (any payload): after a stream of positions `0 .. n-1`, the
slot of every position `p` still in the window holds that position's entry. -/
theorem index_slot_eq_pos_mod {κ : Type} (w : Nat) (hw : 0 < w) (g : Nat → Entry κ)
    (hs : List (Entry κ)) (h : hs.map Entry.pos = natsFrom 0 hs.length) (p : Nat)
    (hp : p < hs.length) (hwin : hs.length ≤ p + w) :
    ((IndexRing.run w g hs).slots (rkv_slot p w)).pos = p ∧
      nthOpt hs p = some ((IndexRing.run w g hs).slots (rkv_slot p w)) := by
  have hh := holds_foldl w hw hs [] { w := w, n := 0, slots := g } (holds_init w g)
  have e : ([] : List (Entry κ)) ++ hs = hs := rfl
  rw [e] at hh
  unfold IndexRing.Holds at hh
  obtain ⟨_, _, hslots⟩ := hh
  have hl := rkv_len_eq_min hs.length w
  have ho : rkv_oldest hs.length w = hs.length - rkv_len hs.length w := rfl
  have h1 : nthOpt hs p = some ((IndexRing.run w g hs).slots (rkv_slot p w)) :=
    hslots p (by omega) hp
  have h2 : nthOpt (hs.map Entry.pos) p = some p := by
    have e0 : 0 + p = p := by omega
    calc nthOpt (hs.map Entry.pos) p = nthOpt (natsFrom 0 hs.length) p := by rw [h]
      _ = some (0 + p) := nthOpt_natsFrom 0 hs.length p hp
      _ = some p := by rw [e0]
  obtain ⟨ent, he, hpos⟩ := nthOpt_map_eq_some Entry.pos hs p p h2
  have h3 : ent = (IndexRing.run w g hs).slots (rkv_slot p w) := Option.some.inj (he.symm.trans h1)
  exact ⟨(congrArg Entry.pos h3).symm.trans hpos, h1⟩

/-- The position `rkv_slot_pos` names for a valid slot is the position of the entry
that slot holds. -/
theorem index_slot_pos_correct {κ : Type} (w : Nat) (hw : 0 < w) (g : Nat → Entry κ)
    (hs : List (Entry κ)) (h : hs.map Entry.pos = natsFrom 0 hs.length) (s : Nat) (hsw : s < w)
    (hv : rkv_slot_valid hs.length w s = true) :
    ((IndexRing.run w g hs).slots s).pos = rkv_slot_pos hs.length w s := by
  have hlt := (rkv_slot_valid_iff hs.length w s hw hsw).1 hv
  obtain ⟨hlo, _, hinv⟩ := rkv_slot_pos_inverse hs.length w s hw hsw
  have hl := rkv_len_eq_min hs.length w
  have ho : rkv_oldest hs.length w = hs.length - rkv_len hs.length w := rfl
  have hslot : rkv_slot (rkv_slot_pos hs.length w s) w = s := by
    have e : rkv_oldest hs.length w + (rkv_slot_pos hs.length w s - rkv_oldest hs.length w) =
        rkv_slot_pos hs.length w s := by omega
    calc rkv_slot (rkv_slot_pos hs.length w s) w
        = rkv_slot (rkv_oldest hs.length w +
            (rkv_slot_pos hs.length w s - rkv_oldest hs.length w)) w := by rw [e]
      _ = rkv_logical_slot hs.length w (rkv_slot_pos hs.length w s - rkv_oldest hs.length w) := rfl
      _ = s := hinv
  have hmain := (index_slot_eq_pos_mod w hw g hs h (rkv_slot_pos hs.length w s) hlt (by omega)).1
  have hat : ((IndexRing.run w g hs).slots (rkv_slot (rkv_slot_pos hs.length w s) w)).pos =
      ((IndexRing.run w g hs).slots s).pos :=
    congrArg (fun q => ((IndexRing.run w g hs).slots q).pos) hslot
  exact hat.symm.trans hmain

end KVWindow
