import KVWindow.Positions

/-!
# KVWindow.Ring: a head/size ring buffer

`w` slots, a `head` (the oldest slot) and a `size` (filled slots). While not
full, `push` writes slot `(head + size) % w` and grows; when full it overwrites
the head slot (the oldest entry) and advances `head`. `Ring.toList` (the seed
write-up's `ringToList`) reads `size` slots from `head`, so slots that were
never written are never read.

`push_simulates_step` proves one ring push is one list-model `step`;
`ring_run_correct` lifts it to whole streams, and `slot_eq_pos_mod` /
`slot_eq_pos_mod_entry` say where each position lives. The Python mirror is
`pyspec/ring.py`. The ring `csrc/ringkv.c` ships (no head, no fill counter) is
`KVWindow.IndexRing`.
-/

namespace KVWindow

open KVList KVArith

/-- Read slot `i` of a buffer (`none` past its end). -/
def getSlot {α : Type} : List (Option α) → Nat → Option α
  | [], _ => none
  | a :: _, 0 => a
  | _ :: l, n + 1 => getSlot l n

/-- Write slot `i` of a buffer (no effect past its end). -/
def setSlot {α : Type} : List (Option α) → Nat → Option α → List (Option α)
  | [], _, _ => []
  | _ :: l, 0, y => y :: l
  | a :: l, n + 1, y => a :: setSlot l n y

/-- `n` empty slots. -/
def emptySlots {α : Type} : Nat → List (Option α)
  | 0 => []
  | n + 1 => none :: emptySlots n

/-- Keep the filled slots (`List.filterMap id`). -/
def somes {α : Type} : List (Option α) → List α
  | [] => []
  | none :: l => somes l
  | some a :: l => a :: somes l

/-- The slot a reader visits `i` places after `head`, read. -/
def slotRead {α : Type} (buf : List (Option α)) (w head i : Nat) : Option α :=
  getSlot buf ((head + i) % w)

/-- The `size` slots read from `head`, in logical (oldest first) order. -/
def readsOf {α : Type} (buf : List (Option α)) (w head size : Nat) : List (Option α) :=
  (natsFrom 0 size).map (slotRead buf w head)

/-- The physical ring buffer. -/
structure Ring (α : Type) where
  w : Nat
  buf : List (Option α)
  head : Nat
  size : Nat

/-- An empty ring of `w` slots. -/
def Ring.empty {α : Type} (w : Nat) : Ring α := Ring.mk w (emptySlots w) 0 0

/-- Push one entry: fill slot `(head + size) % w` while not full; when full,
overwrite the head slot (the oldest) and advance `head`. -/
def Ring.push {α : Type} (r : Ring α) (x : α) : Ring α :=
  if r.size < r.w then
    Ring.mk r.w (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.head (r.size + 1)
  else
    Ring.mk r.w (setSlot r.buf r.head (some x)) ((r.head + 1) % r.w) r.size

/-- The slots read, oldest first: `size` slots from `head`. -/
def Ring.reads {α : Type} (r : Ring α) : List (Option α) :=
  readsOf r.buf r.w r.head r.size

/-- The logical contents (`ringToList`): the read slots, oldest first. -/
def Ring.toList {α : Type} (r : Ring α) : List α :=
  somes r.reads

/-- Well-formedness: `w > 0` slots, `head < w`, `size ≤ w`, `head = 0` until the
ring first fills, and every slot that is read is filled. -/
def Ring.WF {α : Type} (r : Ring α) : Prop :=
  0 < r.w ∧ r.buf.length = r.w ∧ r.head < r.w ∧ r.size ≤ r.w ∧
    (r.size < r.w → r.head = 0) ∧ ∃ vals : List α, r.reads = vals.map some

/-- The ring after streaming `xs` into an empty ring of `w` slots. -/
def Ring.run {α : Type} (w : Nat) (xs : List α) : Ring α :=
  xs.foldl Ring.push (Ring.empty w)

/-! ## Slot lemmas -/

theorem setSlot_cons_succ {α : Type} (a : Option α) (l : List (Option α)) (n : Nat)
    (y : Option α) : setSlot (a :: l) (n + 1) y = a :: setSlot l n y := rfl

theorem length_setSlot {α : Type} :
    ∀ (l : List (Option α)) (k : Nat) (y : Option α), (setSlot l k y).length = l.length
  | [], _, _ => rfl
  | _ :: _, 0, _ => rfl
  | _ :: l, k + 1, y => congrArg (· + 1) (length_setSlot l k y)

theorem getSlot_setSlot_same {α : Type} :
    ∀ (l : List (Option α)) (k : Nat) (y : Option α), k < l.length → getSlot (setSlot l k y) k = y
  | [], _, _, h => by
    have e : ([] : List (Option α)).length = 0 := rfl
    exact False.elim (by omega)
  | _ :: _, 0, _, _ => rfl
  | a :: l, k + 1, y, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact getSlot_setSlot_same l k y (by omega)

theorem getSlot_setSlot_ne {α : Type} :
    ∀ (l : List (Option α)) (k j : Nat) (y : Option α), j ≠ k →
      getSlot (setSlot l k y) j = getSlot l j
  | [], _, _, _, _ => rfl
  | _ :: _, 0, 0, _, h => (h rfl).elim
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | _ :: l, k + 1, j + 1, y, h => getSlot_setSlot_ne l k j y (by omega)

theorem length_emptySlots {α : Type} : ∀ (n : Nat), (emptySlots n : List (Option α)).length = n
  | 0 => rfl
  | n + 1 => congrArg (· + 1) (length_emptySlots (α := α) n)

theorem somes_map_some {α : Type} : ∀ (l : List α), somes (l.map some) = l
  | [] => rfl
  | a :: l => congrArg (List.cons a) (somes_map_some l)

theorem somes_append {α : Type} :
    ∀ (l m : List (Option α)), somes (l ++ m) = somes l ++ somes m
  | [], _ => rfl
  | none :: l, m => somes_append l m
  | some a :: l, m => congrArg (List.cons a) (somes_append l m)

theorem somes_singleton {α : Type} (a : α) : somes [some a] = [a] := rfl

/-! ## Index arithmetic (through `KVArith`) -/

theorem idx_shift (h m i : Nat) :
    ((h + 1) % (m + 1) + i) % (m + 1) = (h + (i + 1)) % (m + 1) := by
  have h1 := mod_add_mod' (h + 1) (m + 1) i
  have e : h + 1 + i = h + (i + 1) := by omega
  have h2 : (h + 1 + i) % (m + 1) = (h + (i + 1)) % (m + 1) := congrArg (fun x => x % (m + 1)) e
  exact h1.trans h2

theorem idx_last (h m : Nat) (hh : h < m + 1) :
    ((h + 1) % (m + 1) + (0 + m)) % (m + 1) = h := by
  have h1 := mod_add_mod' (h + 1) (m + 1) (0 + m)
  have e : h + 1 + (0 + m) = h + (m + 1) := by omega
  have h2 : (h + 1 + (0 + m)) % (m + 1) = (h + (m + 1)) % (m + 1) :=
    congrArg (fun x => x % (m + 1)) e
  have h3 := add_mod_self h (m + 1)
  have h4 := mod_self_lt h (m + 1) hh
  exact h1.trans (h2.trans (h3.trans h4))

theorem idx_ne_head (h m i : Nat) (hh : h < m + 1) (hi : i < m) :
    (h + (i + 1)) % (m + 1) ≠ h := by
  have h1 := mod_ne_of_lt h (h + (i + 1)) (m + 1) (by omega) (by omega) (by omega)
  have h2 := mod_self_lt h (m + 1) hh
  intro heq
  exact h1 (h2.trans heq.symm)

/-! ## One push on the reads -/

/-- Not full (and so `head = 0`): the new entry lands right after the old ones. -/
theorem readsOf_push_lt {α : Type} (buf : List (Option α)) (w s : Nat) (x : α)
    (hlen : buf.length = w) (hs : s < w) :
    readsOf (setSlot buf ((0 + s) % w) (some x)) w 0 (s + 1) = readsOf buf w 0 s ++ [some x] := by
  have hslot : (0 + s) % w = s := by
    have e : 0 + s = s := by omega
    exact (congrArg (fun y => y % w) e).trans (mod_self_lt s w hs)
  have hlast : slotRead (setSlot buf s (some x)) w 0 (0 + s) = some x := by
    have e : (0 + (0 + s)) % w = s := by
      have e0 : 0 + (0 + s) = s := by omega
      exact (congrArg (fun y => y % w) e0).trans (mod_self_lt s w hs)
    calc slotRead (setSlot buf s (some x)) w 0 (0 + s)
        = getSlot (setSlot buf s (some x)) ((0 + (0 + s)) % w) := rfl
      _ = getSlot (setSlot buf s (some x)) s := by rw [e]
      _ = some x := getSlot_setSlot_same buf s (some x) (by omega)
  have hfront : (natsFrom 0 s).map (slotRead (setSlot buf s (some x)) w 0) =
      (natsFrom 0 s).map (slotRead buf w 0) := by
    apply map_natsFrom_congr
    intro i _ hi
    have hiw : (0 + i) % w = i := by
      have e : 0 + i = i := by omega
      exact (congrArg (fun y => y % w) e).trans (mod_self_lt i w (by omega))
    calc slotRead (setSlot buf s (some x)) w 0 i
        = getSlot (setSlot buf s (some x)) ((0 + i) % w) := rfl
      _ = getSlot (setSlot buf s (some x)) i := by rw [hiw]
      _ = getSlot buf i := getSlot_setSlot_ne buf s i (some x) (by omega)
      _ = getSlot buf ((0 + i) % w) := by rw [hiw]
      _ = slotRead buf w 0 i := rfl
  calc readsOf (setSlot buf ((0 + s) % w) (some x)) w 0 (s + 1)
      = readsOf (setSlot buf s (some x)) w 0 (s + 1) := by rw [hslot]
    _ = (natsFrom 0 (s + 1)).map (slotRead (setSlot buf s (some x)) w 0) := rfl
    _ = (natsFrom 0 s ++ [0 + s]).map (slotRead (setSlot buf s (some x)) w 0) := by
        rw [natsFrom_succ_right 0 s]
    _ = (natsFrom 0 s).map (slotRead (setSlot buf s (some x)) w 0) ++
          [slotRead (setSlot buf s (some x)) w 0 (0 + s)] :=
        map_append' (slotRead (setSlot buf s (some x)) w 0) (natsFrom 0 s) [0 + s]
    _ = (natsFrom 0 s).map (slotRead buf w 0) ++ [some x] := by rw [hfront, hlast]
    _ = readsOf buf w 0 s ++ [some x] := rfl

/-- Full (`w = m + 1` slots, all read): the oldest read slot is dropped and the new
entry is read last. -/
theorem readsOf_push_full {α : Type} (buf : List (Option α)) (m h : Nat) (x : α)
    (hlen : buf.length = m + 1) (hh : h < m + 1) :
    readsOf buf (m + 1) h (m + 1) =
        slotRead buf (m + 1) h 0 :: (natsFrom 1 m).map (slotRead buf (m + 1) h) ∧
      readsOf (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (m + 1) =
        (natsFrom 1 m).map (slotRead buf (m + 1) h) ++ [some x] := by
  refine ⟨?_, ?_⟩
  · first
    | rfl
    | (simp only [readsOf, natsFrom, List.map]; done)
  have hshift : (natsFrom 1 m).map (slotRead buf (m + 1) h) =
      (natsFrom 0 m).map (fun i => slotRead buf (m + 1) h (i + 1)) :=
    map_natsFrom_shift (slotRead buf (m + 1) h) 0 m
  have hfront : (natsFrom 0 m).map (slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1))) =
      (natsFrom 0 m).map (fun i => slotRead buf (m + 1) h (i + 1)) := by
    apply map_natsFrom_congr
    intro i _ hi
    calc slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) i
        = getSlot (setSlot buf h (some x)) (((h + 1) % (m + 1) + i) % (m + 1)) := rfl
      _ = getSlot (setSlot buf h (some x)) ((h + (i + 1)) % (m + 1)) := by rw [idx_shift h m i]
      _ = getSlot buf ((h + (i + 1)) % (m + 1)) :=
          getSlot_setSlot_ne buf h _ (some x) (idx_ne_head h m i hh (by omega))
      _ = slotRead buf (m + 1) h (i + 1) := rfl
  have hlast : slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (0 + m) = some x := by
    calc slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (0 + m)
        = getSlot (setSlot buf h (some x)) (((h + 1) % (m + 1) + (0 + m)) % (m + 1)) := rfl
      _ = getSlot (setSlot buf h (some x)) h := by rw [idx_last h m hh]
      _ = some x := getSlot_setSlot_same buf h (some x) (by omega)
  calc readsOf (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (m + 1)
      = (natsFrom 0 (m + 1)).map (slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1))) := rfl
    _ = (natsFrom 0 m ++ [0 + m]).map
          (slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1))) := by
        rw [natsFrom_succ_right 0 m]
    _ = (natsFrom 0 m).map (slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1))) ++
          [slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (0 + m)] :=
        map_append' _ (natsFrom 0 m) [0 + m]
    _ = (natsFrom 0 m).map (fun i => slotRead buf (m + 1) h (i + 1)) ++ [some x] := by
        rw [hfront, hlast]
    _ = (natsFrom 1 m).map (slotRead buf (m + 1) h) ++ [some x] := by rw [hshift]

/-! ## The fields after a push -/

theorem push_of_lt {α : Type} (r : Ring α) (x : α) (h : r.size < r.w) :
    r.push x = Ring.mk r.w (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.head (r.size + 1) := by
  unfold Ring.push
  exact ite_pos' h _ _

theorem push_of_not_lt {α : Type} (r : Ring α) (x : α) (h : ¬ r.size < r.w) :
    r.push x = Ring.mk r.w (setSlot r.buf r.head (some x)) ((r.head + 1) % r.w) r.size := by
  unfold Ring.push
  exact ite_neg' h _ _

theorem push_fields_of_lt {α : Type} (r : Ring α) (x : α) (h : r.size < r.w) :
    (r.push x).w = r.w ∧ (r.push x).buf = setSlot r.buf ((r.head + r.size) % r.w) (some x) ∧
      (r.push x).head = r.head ∧ (r.push x).size = r.size + 1 := by
  have hp := push_of_lt r x h
  refine ⟨?_, ?_, ?_, ?_⟩ <;> (rw [hp]; try rfl)

theorem push_fields_of_not_lt {α : Type} (r : Ring α) (x : α) (h : ¬ r.size < r.w) :
    (r.push x).w = r.w ∧ (r.push x).buf = setSlot r.buf r.head (some x) ∧
      (r.push x).head = (r.head + 1) % r.w ∧ (r.push x).size = r.size := by
  have hp := push_of_not_lt r x h
  refine ⟨?_, ?_, ?_, ?_⟩ <;> (rw [hp]; try rfl)

theorem push_w {α : Type} (r : Ring α) (x : α) : (r.push x).w = r.w := by
  by_cases h : r.size < r.w
  · exact (push_fields_of_lt r x h).1
  · exact (push_fields_of_not_lt r x h).1

/-- Build `Ring.WF` from its six parts. -/
theorem wf_intro {α : Type} (r : Ring α) (h1 : 0 < r.w) (h2 : r.buf.length = r.w)
    (h3 : r.head < r.w) (h4 : r.size ≤ r.w) (h5 : r.size < r.w → r.head = 0)
    (vals : List α) (h6 : r.reads = vals.map some) : r.WF := by
  unfold Ring.WF
  exact ⟨h1, h2, h3, h4, h5, vals, h6⟩

theorem reads_length {α : Type} (r : Ring α) : r.reads.length = r.size :=
  (congrArg List.length (rfl : r.reads = (natsFrom 0 r.size).map (slotRead r.buf r.w r.head))).trans
    ((length_map' (slotRead r.buf r.w r.head) (natsFrom 0 r.size)).trans (length_natsFrom 0 r.size))

theorem reads_push_of_lt {α : Type} (r : Ring α) (x : α) (hwf : r.WF) (hs : r.size < r.w) :
    (r.push x).reads = r.reads ++ [some x] := by
  unfold Ring.WF at hwf
  obtain ⟨_, hlen, _, _, hfill, _⟩ := hwf
  have h0 : r.head = 0 := hfill hs
  have hp := push_of_lt r x hs
  calc (r.push x).reads
      = (Ring.mk r.w (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.head (r.size + 1) :
          Ring α).reads := by rw [hp]
    _ = readsOf (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.w r.head (r.size + 1) := rfl
    _ = readsOf (setSlot r.buf ((0 + r.size) % r.w) (some x)) r.w 0 (r.size + 1) := by rw [h0]
    _ = readsOf r.buf r.w 0 r.size ++ [some x] := readsOf_push_lt r.buf r.w r.size x hlen hs
    _ = readsOf r.buf r.w r.head r.size ++ [some x] := by rw [h0]
    _ = r.reads ++ [some x] := rfl

theorem reads_push_full {α : Type} (r : Ring α) (x : α) (hwf : r.WF) (hs : ¬ r.size < r.w) :
    ∃ a rest, r.reads = a :: rest ∧ (r.push x).reads = rest ++ [some x] := by
  unfold Ring.WF at hwf
  obtain ⟨hw, hlen, hhead, hsize, _, _⟩ := hwf
  have hsz : r.size = r.w := by omega
  obtain ⟨m, hm⟩ : ∃ m, r.w = m + 1 := ⟨r.w - 1, by omega⟩
  have hpair := readsOf_push_full r.buf m r.head x (by omega) (by omega)
  have hp := push_of_not_lt r x hs
  refine ⟨slotRead r.buf (m + 1) r.head 0, (natsFrom 1 m).map (slotRead r.buf (m + 1) r.head),
    ?_, ?_⟩
  · calc r.reads = readsOf r.buf r.w r.head r.size := rfl
      _ = readsOf r.buf (m + 1) r.head (m + 1) := by rw [hsz, hm]
      _ = slotRead r.buf (m + 1) r.head 0 :: (natsFrom 1 m).map (slotRead r.buf (m + 1) r.head) :=
          hpair.1
  · calc (r.push x).reads
        = (Ring.mk r.w (setSlot r.buf r.head (some x)) ((r.head + 1) % r.w) r.size : Ring α).reads := by
          rw [hp]
      _ = readsOf (setSlot r.buf r.head (some x)) r.w ((r.head + 1) % r.w) r.size := rfl
      _ = readsOf (setSlot r.buf r.head (some x)) (m + 1) ((r.head + 1) % (m + 1)) (m + 1) := by
          rw [hsz, hm]
      _ = (natsFrom 1 m).map (slotRead r.buf (m + 1) r.head) ++ [some x] := hpair.2

/-! ## The ring theorems -/

/-- One ring push is one list-model `step` on the logical contents. -/
theorem push_simulates_step {α : Type} (r : Ring α) (x : α) (hwf : r.WF) :
    (r.push x).toList = step r.w r.toList x := by
  have hwf0 := hwf
  unfold Ring.WF at hwf
  obtain ⟨_, _, _, hsize, _, vals, hvals⟩ := hwf
  have hvlen : vals.length = r.size := by
    have h1 := reads_length r
    have h2 : r.reads.length = (vals.map some).length := congrArg List.length hvals
    have h3 := length_map' some vals
    omega
  have htl : r.toList = vals := by
    calc r.toList = somes r.reads := rfl
      _ = somes (vals.map some) := by rw [hvals]
      _ = vals := somes_map_some vals
  by_cases hs : r.size < r.w
  · have hnc : ¬ r.w < (vals ++ [x]).length := by
      have := length_append_singleton vals x
      omega
    calc (r.push x).toList = somes (r.push x).reads := rfl
      _ = somes (r.reads ++ [some x]) := by rw [reads_push_of_lt r x hwf0 hs]
      _ = somes r.reads ++ somes [some x] := somes_append r.reads [some x]
      _ = r.toList ++ [x] := rfl
      _ = vals ++ [x] := by rw [htl]
      _ = step r.w vals x := (step_of_not_lt r.w vals x hnc).symm
      _ = step r.w r.toList x := by rw [htl]
  · obtain ⟨a, rest, hR, hR'⟩ := reads_push_full r x hwf0 hs
    have hrv : a :: rest = vals.map some := hR.symm.trans hvals
    cases vals with
    | nil =>
      have hc : a :: rest = [] := hrv
      exact absurd hc (cons_ne_nil' a rest)
    | cons v vs =>
      have hc : a :: rest = some v :: vs.map some := hrv
      have hrest : rest = vs.map some := (List.cons.inj hc).2
      have hvslen : vs.length + 1 = r.size := hvlen
      have hc2 : r.w < ((v :: vs) ++ [x]).length := by
        have h1 := length_append_singleton (v :: vs) x
        have h2 : (v :: vs).length = vs.length + 1 := rfl
        omega
      calc (r.push x).toList = somes (r.push x).reads := rfl
        _ = somes (rest ++ [some x]) := by rw [hR']
        _ = somes (vs.map some ++ [some x]) := by rw [hrest]
        _ = somes (vs.map some) ++ somes [some x] := somes_append _ _
        _ = vs ++ somes [some x] := by rw [somes_map_some vs]
        _ = vs ++ [x] := rfl
        _ = ((v :: vs) ++ [x]).drop 1 := rfl
        _ = step r.w (v :: vs) x := (step_of_lt r.w (v :: vs) x hc2).symm
        _ = step r.w r.toList x := by rw [htl]

/-- Pushing keeps the ring well formed. -/
theorem push_preserves_wf {α : Type} (r : Ring α) (x : α) (hwf : r.WF) : (r.push x).WF := by
  have hwf0 := hwf
  unfold Ring.WF at hwf
  obtain ⟨hw, hlen, hhead, hsize, hfill, vals, hvals⟩ := hwf
  by_cases hs : r.size < r.w
  · obtain ⟨pw, pbuf, phead, psize⟩ := push_fields_of_lt r x hs
    have hbl : (r.push x).buf.length = r.buf.length :=
      (congrArg List.length pbuf).trans (length_setSlot r.buf _ (some x))
    have hreads : (r.push x).reads = (vals ++ [x]).map some := by
      calc (r.push x).reads = r.reads ++ [some x] := reads_push_of_lt r x hwf0 hs
        _ = vals.map some ++ [some x] := by rw [hvals]
        _ = (vals ++ [x]).map some := (map_append' some vals [x]).symm
    have h0 : r.head = 0 := hfill hs
    exact wf_intro (r.push x) (by omega) (by omega) (by omega) (by omega)
      (fun _ => by omega) (vals ++ [x]) hreads
  · obtain ⟨a, rest, hR, hR'⟩ := reads_push_full r x hwf0 hs
    obtain ⟨pw, pbuf, phead, psize⟩ := push_fields_of_not_lt r x hs
    have hbl : (r.push x).buf.length = r.buf.length :=
      (congrArg List.length pbuf).trans (length_setSlot r.buf r.head (some x))
    have hmod : (r.head + 1) % r.w < r.w := mod_lt' (r.head + 1) hw
    have hrv : a :: rest = vals.map some := hR.symm.trans hvals
    cases vals with
    | nil =>
      have hc : a :: rest = [] := hrv
      exact absurd hc (cons_ne_nil' a rest)
    | cons v vs =>
      have hc : a :: rest = some v :: vs.map some := hrv
      have hrest : rest = vs.map some := (List.cons.inj hc).2
      have hreads : (r.push x).reads = (vs ++ [x]).map some := by
        calc (r.push x).reads = rest ++ [some x] := hR'
          _ = vs.map some ++ [some x] := by rw [hrest]
          _ = (vs ++ [x]).map some := (map_append' some vs [x]).symm
      exact wf_intro (r.push x) (by omega) (by omega) (by omega) (by omega)
        (fun h => absurd h (by omega)) (vs ++ [x]) hreads

theorem empty_wf {α : Type} (w : Nat) (hw : 0 < w) : (Ring.empty w : Ring α).WF := by
  have ew : (Ring.empty w : Ring α).w = w := rfl
  have eb : (Ring.empty w : Ring α).buf.length = w := length_emptySlots (α := α) w
  have eh : (Ring.empty w : Ring α).head = 0 := rfl
  have es : (Ring.empty w : Ring α).size = 0 := rfl
  have er : (Ring.empty w : Ring α).reads = ([] : List α).map some := rfl
  exact wf_intro (Ring.empty w : Ring α) (by omega) (by omega) (by omega) (by omega)
    (fun _ => eh) [] er

theorem empty_toList {α : Type} (w : Nat) : (Ring.empty w : Ring α).toList = [] := rfl

theorem foldl_wf {α : Type} : ∀ (xs : List α) (r : Ring α), r.WF → (xs.foldl Ring.push r).WF
  | [], _, h => h
  | x :: xs, r, h => foldl_wf xs (r.push x) (push_preserves_wf r x h)

theorem ring_foldl_toList {α : Type} (w : Nat) :
    ∀ (xs : List α) (r : Ring α), r.WF → r.w = w →
      (xs.foldl Ring.push r).toList = pushChunk w r.toList xs
  | [], _, _, _ => rfl
  | x :: xs, r, hwf, hrw => by
    have ih := ring_foldl_toList w xs (r.push x) (push_preserves_wf r x hwf)
      ((push_w r x).trans hrw)
    have hstep : (r.push x).toList = step w r.toList x := by
      calc (r.push x).toList = step r.w r.toList x := push_simulates_step r x hwf
        _ = step w r.toList x := by rw [hrw]
    calc ((x :: xs).foldl Ring.push r).toList = (xs.foldl Ring.push (r.push x)).toList := rfl
      _ = pushChunk w (r.push x).toList xs := ih
      _ = pushChunk w (step w r.toList x) xs := by rw [hstep]
      _ = pushChunk w r.toList (x :: xs) := rfl

/-- A whole stream through the ring equals the list model. -/
theorem ring_run_correct {α : Type} (w : Nat) (xs : List α) (hw : 0 < w) :
    (Ring.run w xs).toList = run w xs := by
  calc (Ring.run w xs).toList = (xs.foldl Ring.push (Ring.empty w)).toList := rfl
    _ = pushChunk w (Ring.empty w : Ring α).toList xs :=
        ring_foldl_toList w xs (Ring.empty w) (empty_wf w hw) rfl
    _ = pushChunk w [] xs := rfl
    _ = run w xs := rfl

/-- ... and so the spec's window. -/
theorem ring_run_lastWindow {α : Type} (w : Nat) (xs : List α) (hw : 0 < w) :
    (Ring.run w xs).toList = lastWindow w xs :=
  (ring_run_correct w xs hw).trans (run_correct w xs)

/-! ## Where each position lives -/

theorem push_shape {α : Type} (r : Ring α) (x : α) (k : Nat)
    (hsize : r.size = min r.w k) (hhead : r.head = (k - r.size) % r.w) :
    (r.push x).size = min r.w (k + 1) ∧ (r.push x).head = (k + 1 - (r.push x).size) % r.w := by
  by_cases hs : r.size < r.w
  · obtain ⟨_, _, phead, psize⟩ := push_fields_of_lt r x hs
    have e : k + 1 - (r.size + 1) = k - r.size := by omega
    refine ⟨by omega, ?_⟩
    calc (r.push x).head = r.head := phead
      _ = (k - r.size) % r.w := hhead
      _ = (k + 1 - (r.size + 1)) % r.w := by rw [e]
      _ = (k + 1 - (r.push x).size) % r.w := by rw [psize]
  · obtain ⟨_, _, phead, psize⟩ := push_fields_of_not_lt r x hs
    have e : k - r.size + 1 = k + 1 - r.size := by omega
    refine ⟨by omega, ?_⟩
    calc (r.push x).head = (r.head + 1) % r.w := phead
      _ = ((k - r.size) % r.w + 1) % r.w := by rw [hhead]
      _ = (k - r.size + 1) % r.w := mod_add_mod' (k - r.size) r.w 1
      _ = (k + 1 - r.size) % r.w := by rw [e]
      _ = (k + 1 - (r.push x).size) % r.w := by rw [psize]

theorem foldl_shape {α : Type} (w : Nat) :
    ∀ (xs : List α) (r : Ring α) (k : Nat), r.w = w → r.size = min w k →
      r.head = (k - r.size) % w →
      (xs.foldl Ring.push r).w = w ∧ (xs.foldl Ring.push r).size = min w (k + xs.length) ∧
        (xs.foldl Ring.push r).head = (k + xs.length - (xs.foldl Ring.push r).size) % w
  | [], r, k, hrw, hs, hh => by
    have e0 : k + ([] : List α).length = k := rfl
    have e1 : ([] : List α).foldl Ring.push r = r := rfl
    first
    | exact ⟨hrw, hs, hh⟩
    | (rw [e1, e0]; exact ⟨hrw, hs, hh⟩)
  | x :: xs, r, k, hrw, hs, hh => by
    have hs2 : r.size = min r.w k := by omega
    have hh2 : r.head = (k - r.size) % r.w := by
      calc r.head = (k - r.size) % w := hh
        _ = (k - r.size) % r.w := by rw [hrw]
    obtain ⟨hs', hh'⟩ := push_shape r x k hs2 hh2
    have hpw : (r.push x).w = w := (push_w r x).trans hrw
    have hs'' : (r.push x).size = min w (k + 1) := by omega
    have hh'' : (r.push x).head = (k + 1 - (r.push x).size) % w := by
      calc (r.push x).head = (k + 1 - (r.push x).size) % r.w := hh'
        _ = (k + 1 - (r.push x).size) % w := by rw [hrw]
    have ih := foldl_shape w xs (r.push x) (k + 1) hpw hs'' hh''
    have e : k + 1 + xs.length = k + (x :: xs).length := by
      have e0 : (x :: xs).length = xs.length + 1 := rfl
      omega
    rw [e] at ih
    exact ih

theorem run_shape {α : Type} (w : Nat) (xs : List α) :
    (Ring.run w xs).w = w ∧ (Ring.run w xs).size = min w xs.length ∧
      (Ring.run w xs).head = (xs.length - (Ring.run w xs).size) % w := by
  have hs0 : (Ring.empty w : Ring α).size = min w 0 := by
    have e : (Ring.empty w : Ring α).size = 0 := rfl
    omega
  have hh0 : (Ring.empty w : Ring α).head = (0 - (Ring.empty w : Ring α).size) % w := by
    calc (Ring.empty w : Ring α).head = 0 := rfl
      _ = 0 % w := (zero_mod' w).symm
      _ = (0 - (Ring.empty w : Ring α).size) % w := rfl
  have h := foldl_shape w xs (Ring.empty w) 0 rfl hs0 hh0
  have e : 0 + xs.length = xs.length := by omega
  rw [e] at h
  exact h

theorem ring_run_natsFrom (w n : Nat) (hw : 0 < w) :
    (Ring.run w (natsFrom 0 n)).toList = natsFrom (n - min w n) (min w n) := by
  have e1 : 0 + (n - w) = n - min w n := by omega
  have e2 : n - (n - w) = min w n := by omega
  have hl : (natsFrom 0 n).length = n := length_natsFrom 0 n
  calc (Ring.run w (natsFrom 0 n)).toList = lastWindow w (natsFrom 0 n) :=
        ring_run_lastWindow w (natsFrom 0 n) hw
    _ = (natsFrom 0 n).drop ((natsFrom 0 n).length - w) := rfl
    _ = (natsFrom 0 n).drop (n - w) := by rw [hl]
    _ = natsFrom (0 + (n - w)) (n - (n - w)) := drop_natsFrom 0 n (n - w)
    _ = natsFrom (n - min w n) (min w n) := by rw [e1, e2]

/-- A well-formed ring with the shape of a stream `xs` holds, in slot `p % w`, the
`p`-th entry of the stream, for every `p` still in the window. -/
theorem slot_of_facts {α : Type} (r : Ring α) (xs : List α) (w p : Nat)
    (hrw : r.w = w) (hsize : r.size = min w xs.length)
    (hhead : r.head = (xs.length - r.size) % w) (hwf : r.WF)
    (htl : r.toList = lastWindow w xs) (hp : p < xs.length) (hwin : xs.length ≤ p + w) :
    getSlot r.buf (p % w) = nthOpt xs p := by
  unfold Ring.WF at hwf
  obtain ⟨_, _, _, _, _, vals, hvals⟩ := hwf
  have hvt : vals = lastWindow w xs := by
    calc vals = somes (vals.map some) := (somes_map_some vals).symm
      _ = somes r.reads := by rw [hvals]
      _ = r.toList := rfl
      _ = lastWindow w xs := htl
  have hi : p - (xs.length - w) < r.size := by omega
  have h1 : nthOpt r.reads (p - (xs.length - w)) =
      some (slotRead r.buf r.w r.head (0 + (p - (xs.length - w)))) :=
    nthOpt_map_natsFrom (slotRead r.buf r.w r.head) 0 r.size (p - (xs.length - w)) hi
  rw [hvals] at h1
  have h2 := nthOpt_map_some vals _ _ h1
  rw [hvt] at h2
  have h3 : nthOpt (lastWindow w xs) (p - (xs.length - w)) =
      nthOpt xs (xs.length - w + (p - (xs.length - w))) :=
    nthOpt_drop xs (xs.length - w) (p - (xs.length - w))
  have e1 : xs.length - w + (p - (xs.length - w)) = p := by omega
  have hidx : (r.head + (0 + (p - (xs.length - w)))) % r.w = p % w := by
    have e2 : xs.length - r.size + (0 + (p - (xs.length - w))) = p := by omega
    calc (r.head + (0 + (p - (xs.length - w)))) % r.w
        = ((xs.length - r.size) % w + (0 + (p - (xs.length - w)))) % w := by rw [hhead, hrw]
      _ = (xs.length - r.size + (0 + (p - (xs.length - w)))) % w :=
          mod_add_mod' (xs.length - r.size) w (0 + (p - (xs.length - w)))
      _ = p % w := by rw [e2]
  calc getSlot r.buf (p % w)
      = getSlot r.buf ((r.head + (0 + (p - (xs.length - w)))) % r.w) := by rw [hidx]
    _ = slotRead r.buf r.w r.head (0 + (p - (xs.length - w))) := rfl
    _ = nthOpt (lastWindow w xs) (p - (xs.length - w)) := h2.symm
    _ = nthOpt xs (xs.length - w + (p - (xs.length - w))) := h3
    _ = nthOpt xs p := by rw [e1]

/-- After a stream `xs` through a ring of `w > 0` slots, every position `p` still in the
window holds the `p`-th entry of the stream, in slot `p % w`. -/
theorem ring_slot_eq_nth {α : Type} (w : Nat) (xs : List α) (p : Nat) (hw : 0 < w)
    (hp : p < xs.length) (hwin : xs.length ≤ p + w) :
    getSlot (Ring.run w xs).buf (p % w) = nthOpt xs p := by
  obtain ⟨hrw, hsize, hhead⟩ := run_shape w xs
  exact slot_of_facts (Ring.run w xs) xs w p hrw hsize hhead
    (foldl_wf xs (Ring.empty w) (empty_wf w hw)) (ring_run_lastWindow w xs hw) hp hwin

/-- Pushing positions `0 .. n-1` into a ring of `w` slots leaves every position `p`
still in the window (`n ≤ p + w`) in slot `p % w`. -/
theorem slot_eq_pos_mod (w n p : Nat) (hw : 0 < w) (hp : p < n) (hwin : n ≤ p + w) :
    getSlot (Ring.run w (natsFrom 0 n)).buf (p % w) = some p := by
  have hl : (natsFrom 0 n).length = n := length_natsFrom 0 n
  have e : 0 + p = p := by omega
  calc getSlot (Ring.run w (natsFrom 0 n)).buf (p % w) = nthOpt (natsFrom 0 n) p :=
        ring_slot_eq_nth w (natsFrom 0 n) p hw (by omega) (by omega)
    _ = some (0 + p) := nthOpt_natsFrom 0 n p hp
    _ = some p := by rw [e]

/-- The same for entries with positions and any payload: after a stream whose entries
carry positions `0 .. n-1`, slot `p % w` holds the entry of position `p`. -/
theorem slot_eq_pos_mod_entry {κ : Type} (w : Nat) (hs : List (Entry κ)) (p : Nat) (hw : 0 < w)
    (h : hs.map Entry.pos = natsFrom 0 hs.length) (hp : p < hs.length)
    (hwin : hs.length ≤ p + w) :
    ∃ ent, getSlot (Ring.run w hs).buf (p % w) = some ent ∧ ent.pos = p := by
  have h1 := ring_slot_eq_nth w hs p hw hp hwin
  have h2 : nthOpt (hs.map Entry.pos) p = some p := by
    have e : 0 + p = p := by omega
    calc nthOpt (hs.map Entry.pos) p = nthOpt (natsFrom 0 hs.length) p := by rw [h]
      _ = some (0 + p) := nthOpt_natsFrom 0 hs.length p hp
      _ = some p := by rw [e]
  obtain ⟨ent, he, hpos⟩ := nthOpt_map_eq_some Entry.pos hs p p h2
  exact ⟨ent, h1.trans he, hpos⟩

end KVWindow
