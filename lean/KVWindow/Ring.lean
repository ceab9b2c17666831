import KVWindow.Positions

/-!
# KVWindow.Ring: the ring buffer an inference engine writes

`w` slots, a `head` (the oldest slot) and a `size` (filled slots). While not
full, `push` writes slot `(head + size) % w` and grows; when full it overwrites
the head slot (the oldest entry) and advances `head`. `Ring.toList` (the seed
write-up's `ringToList`) reads `size` slots from `head`, so slots that were
never written are never read.

`push_simulates_step` proves one ring push is one list-model `step`;
`ring_run_correct` lifts it to whole streams, and `slot_eq_pos_mod` says where
each position lives. The Python mirror is `pyspec/ring.py`.
-/

namespace KVWindow

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
  | a :: l, k + 1, y => by
    rw [setSlot_cons_succ, length_cons', length_cons', length_setSlot l k y]

theorem getSlot_setSlot_same {α : Type} :
    ∀ (l : List (Option α)) (k : Nat) (y : Option α), k < l.length → getSlot (setSlot l k y) k = y
  | [], k, _, h => by
    have h' : k < 0 := h
    exact False.elim (by omega)
  | _ :: _, 0, _, _ => rfl
  | a :: l, k + 1, y, h => by
    have h' : k + 1 < l.length + 1 := h
    show getSlot (setSlot l k y) k = y
    exact getSlot_setSlot_same l k y (by omega)

theorem getSlot_setSlot_ne {α : Type} :
    ∀ (l : List (Option α)) (k j : Nat) (y : Option α), j ≠ k →
      getSlot (setSlot l k y) j = getSlot l j
  | [], _, _, _, _ => rfl
  | _ :: _, 0, 0, _, h => (h rfl).elim
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | a :: l, k + 1, j + 1, y, h => by
    show getSlot (setSlot l k y) j = getSlot l j
    exact getSlot_setSlot_ne l k j y (by omega)

theorem length_emptySlots {α : Type} : ∀ (n : Nat), (emptySlots n : List (Option α)).length = n
  | 0 => rfl
  | n + 1 => by
    show (emptySlots n : List (Option α)).length + 1 = n + 1
    rw [length_emptySlots n]

theorem somes_map_some {α : Type} : ∀ (l : List α), somes (l.map some) = l
  | [] => rfl
  | a :: l => by
    show a :: somes (l.map some) = a :: l
    rw [somes_map_some l]

theorem somes_append {α : Type} :
    ∀ (l m : List (Option α)), somes (l ++ m) = somes l ++ somes m
  | [], _ => rfl
  | none :: l, m => by
    show somes (l ++ m) = somes l ++ somes m
    exact somes_append l m
  | some a :: l, m => by
    show a :: somes (l ++ m) = a :: (somes l ++ somes m)
    rw [somes_append l m]

theorem somes_singleton {α : Type} (a : α) : somes [some a] = [a] := rfl

/-! ## Index arithmetic (the only place `%` is reasoned about) -/

theorem idx_shift (h m i : Nat) :
    ((h + 1) % (m + 1) + i) % (m + 1) = (h + (i + 1)) % (m + 1) := by
  have e : h + 1 + i = h + (i + 1) := by omega
  rw [Nat.mod_add_mod, e]

theorem idx_last (h m : Nat) (hh : h < m + 1) :
    ((h + 1) % (m + 1) + (0 + m)) % (m + 1) = h := by
  have e : h + 1 + (0 + m) = h + (m + 1) := by omega
  rw [Nat.mod_add_mod, e, Nat.add_mod_right]
  exact Nat.mod_eq_of_lt hh

theorem idx_ne_head (h m i : Nat) (hh : h < m + 1) (hi : i < m) :
    (h + (i + 1)) % (m + 1) ≠ h := by
  by_cases hc : h + (i + 1) < m + 1
  · rw [Nat.mod_eq_of_lt hc]
    omega
  · have e : h + (i + 1) = (h + i - m) + (m + 1) := by omega
    rw [e, Nat.add_mod_right, Nat.mod_eq_of_lt (show h + i - m < m + 1 by omega)]
    omega

/-! ## One push on the reads -/

/-- Not full (and so `head = 0`): the new entry lands right after the old ones. -/
theorem readsOf_push_lt {α : Type} (buf : List (Option α)) (w s : Nat) (x : α)
    (hlen : buf.length = w) (hs : s < w) :
    readsOf (setSlot buf ((0 + s) % w) (some x)) w 0 (s + 1) = readsOf buf w 0 s ++ [some x] := by
  have hlast : slotRead (setSlot buf ((0 + s) % w) (some x)) w 0 (0 + s) = some x := by
    unfold slotRead
    simp only [Nat.zero_add]
    rw [Nat.mod_eq_of_lt hs]
    exact getSlot_setSlot_same buf s (some x) (by omega)
  have hfront : (natsFrom 0 s).map (slotRead (setSlot buf ((0 + s) % w) (some x)) w 0) =
      (natsFrom 0 s).map (slotRead buf w 0) := by
    apply map_natsFrom_congr
    intro i _ hi
    unfold slotRead
    simp only [Nat.zero_add]
    rw [Nat.mod_eq_of_lt hs, Nat.mod_eq_of_lt (show i < w by omega)]
    exact getSlot_setSlot_ne buf s i (some x) (by omega)
  unfold readsOf
  rw [natsFrom_succ_right, map_append', map_singleton', hfront, hlast]

/-- Full (`w = m + 1` slots, all read): the oldest read slot is dropped and the new
entry is read last. -/
theorem readsOf_push_full {α : Type} (buf : List (Option α)) (m h : Nat) (x : α)
    (hlen : buf.length = m + 1) (hh : h < m + 1) :
    readsOf buf (m + 1) h (m + 1) =
        slotRead buf (m + 1) h 0 :: (natsFrom 1 m).map (slotRead buf (m + 1) h) ∧
      readsOf (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (m + 1) =
        (natsFrom 1 m).map (slotRead buf (m + 1) h) ++ [some x] := by
  constructor
  · unfold readsOf
    rw [natsFrom_succ, map_cons', Nat.zero_add]
  · have hshift := map_natsFrom_shift (slotRead buf (m + 1) h) 0 m
    rw [Nat.zero_add] at hshift
    have hfront : (natsFrom 0 m).map (slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1))) =
        (natsFrom 0 m).map (fun i => slotRead buf (m + 1) h (i + 1)) := by
      apply map_natsFrom_congr
      intro i _ hi
      show getSlot (setSlot buf h (some x)) (((h + 1) % (m + 1) + i) % (m + 1)) =
        getSlot buf ((h + (i + 1)) % (m + 1))
      rw [idx_shift h m i]
      exact getSlot_setSlot_ne buf h _ (some x) (idx_ne_head h m i hh (by omega))
    have hlast : slotRead (setSlot buf h (some x)) (m + 1) ((h + 1) % (m + 1)) (0 + m) = some x := by
      show getSlot (setSlot buf h (some x)) (((h + 1) % (m + 1) + (0 + m)) % (m + 1)) = some x
      rw [idx_last h m hh]
      exact getSlot_setSlot_same buf h (some x) (by omega)
    unfold readsOf
    rw [natsFrom_succ_right, map_append', map_singleton', hshift, hfront, hlast]

theorem push_of_lt {α : Type} (r : Ring α) (x : α) (h : r.size < r.w) :
    r.push x = Ring.mk r.w (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.head (r.size + 1) := by
  unfold Ring.push
  rw [if_pos h]

theorem push_of_not_lt {α : Type} (r : Ring α) (x : α) (h : ¬ r.size < r.w) :
    r.push x = Ring.mk r.w (setSlot r.buf r.head (some x)) ((r.head + 1) % r.w) r.size := by
  unfold Ring.push
  rw [if_neg h]

theorem push_w {α : Type} (r : Ring α) (x : α) : (r.push x).w = r.w := by
  by_cases h : r.size < r.w
  · exact congrArg Ring.w (push_of_lt r x h)
  · exact congrArg Ring.w (push_of_not_lt r x h)

theorem reads_length {α : Type} (r : Ring α) : r.reads.length = r.size := by
  show ((natsFrom 0 r.size).map (slotRead r.buf r.w r.head)).length = r.size
  rw [length_map', length_natsFrom]

theorem reads_push_of_lt {α : Type} (r : Ring α) (x : α) (hwf : r.WF) (hs : r.size < r.w) :
    (r.push x).reads = r.reads ++ [some x] := by
  unfold Ring.WF at hwf
  obtain ⟨_, hlen, _, _, hfill, _⟩ := hwf
  have h0 : r.head = 0 := hfill hs
  rw [push_of_lt r x hs]
  show readsOf (setSlot r.buf ((r.head + r.size) % r.w) (some x)) r.w r.head (r.size + 1) =
    readsOf r.buf r.w r.head r.size ++ [some x]
  rw [h0]
  exact readsOf_push_lt r.buf r.w r.size x hlen hs

theorem reads_push_full {α : Type} (r : Ring α) (x : α) (hwf : r.WF) (hs : ¬ r.size < r.w) :
    ∃ a rest, r.reads = a :: rest ∧ (r.push x).reads = rest ++ [some x] := by
  unfold Ring.WF at hwf
  obtain ⟨hw, hlen, hhead, hsize, _, _⟩ := hwf
  have hsz : r.size = r.w := by omega
  obtain ⟨m, hm⟩ : ∃ m, r.w = m + 1 := ⟨r.w - 1, by omega⟩
  have hpair := readsOf_push_full r.buf m r.head x (by omega) (by omega)
  refine ⟨slotRead r.buf (m + 1) r.head 0, (natsFrom 1 m).map (slotRead r.buf (m + 1) r.head),
    ?_, ?_⟩
  · show readsOf r.buf r.w r.head r.size = _
    rw [hsz, hm]
    exact hpair.1
  · rw [push_of_not_lt r x hs]
    show readsOf (setSlot r.buf r.head (some x)) r.w ((r.head + 1) % r.w) r.size = _
    rw [hsz, hm]
    exact hpair.2

/-! ## The ring theorems -/

/-- One ring push is one list-model `step` on the logical contents. -/
theorem push_simulates_step {α : Type} (r : Ring α) (x : α) (hwf : r.WF) :
    (r.push x).toList = step r.w r.toList x := by
  have hwf0 := hwf
  unfold Ring.WF at hwf
  obtain ⟨_, _, _, hsize, _, vals, hvals⟩ := hwf
  have hvlen : vals.length = r.size := by
    rw [← length_map' some vals, ← hvals, reads_length]
  show somes (r.push x).reads = step r.w (somes r.reads) x
  by_cases hs : r.size < r.w
  · rw [reads_push_of_lt r x hwf0 hs, hvals, somes_append, somes_map_some, somes_singleton]
    have hnc : ¬ r.w < (vals ++ [x]).length := by
      rw [length_append_singleton]
      omega
    unfold step
    rw [if_neg hnc]
  · obtain ⟨a, rest, hR, hR'⟩ := reads_push_full r x hwf0 hs
    rw [hR', hvals]
    rw [hR] at hvals
    cases vals with
    | nil =>
      have hv3 : a :: rest = [] := hvals
      exact absurd hv3 (cons_ne_nil' a rest)
    | cons v vs =>
      have hv3 : a :: rest = some v :: vs.map some := hvals
      have hrest : rest = vs.map some := (List.cons.inj hv3).2
      have hvslen : vs.length + 1 = r.size := hvlen
      rw [hrest, somes_append, somes_map_some, somes_singleton, somes_map_some]
      have hc : r.w < ((v :: vs) ++ [x]).length := by
        rw [length_append_singleton]
        show r.w < vs.length + 1 + 1
        omega
      unfold step
      rw [if_pos hc, cons_append', drop_one_cons]

/-- Pushing keeps the ring well formed. -/
theorem push_preserves_wf {α : Type} (r : Ring α) (x : α) (hwf : r.WF) : (r.push x).WF := by
  have hwf0 := hwf
  unfold Ring.WF at hwf
  obtain ⟨hw, hlen, hhead, hsize, hfill, vals, hvals⟩ := hwf
  by_cases hs : r.size < r.w
  · have hreads := reads_push_of_lt r x hwf0 hs
    have hmk := push_of_lt r x hs
    have pw : (r.push x).w = r.w := congrArg Ring.w hmk
    have pbuf : (r.push x).buf = setSlot r.buf ((r.head + r.size) % r.w) (some x) :=
      congrArg Ring.buf hmk
    have phead : (r.push x).head = r.head := congrArg Ring.head hmk
    have psize : (r.push x).size = r.size + 1 := congrArg Ring.size hmk
    unfold Ring.WF
    rw [hreads, pw, pbuf, phead, psize]
    refine ⟨hw, ?_, hhead, by omega, fun _ => hfill hs, vals ++ [x], ?_⟩
    · rw [length_setSlot]
      exact hlen
    · rw [hvals, map_append', map_singleton']
  · obtain ⟨a, rest, hR, hR'⟩ := reads_push_full r x hwf0 hs
    have hmk := push_of_not_lt r x hs
    have pw : (r.push x).w = r.w := congrArg Ring.w hmk
    have pbuf : (r.push x).buf = setSlot r.buf r.head (some x) := congrArg Ring.buf hmk
    have phead : (r.push x).head = (r.head + 1) % r.w := congrArg Ring.head hmk
    have psize : (r.push x).size = r.size := congrArg Ring.size hmk
    unfold Ring.WF
    rw [hR', pw, pbuf, phead, psize]
    refine ⟨hw, ?_, Nat.mod_lt _ hw, hsize, fun h => absurd h hs, ?_⟩
    · rw [length_setSlot]
      exact hlen
    · rw [hR] at hvals
      cases vals with
      | nil =>
        have hv3 : a :: rest = [] := hvals
        exact absurd hv3 (cons_ne_nil' a rest)
      | cons v vs =>
        have hv3 : a :: rest = some v :: vs.map some := hvals
        have hrest : rest = vs.map some := (List.cons.inj hv3).2
        refine ⟨vs ++ [x], ?_⟩
        rw [hrest, map_append', map_singleton']

theorem empty_wf {α : Type} (w : Nat) (hw : 0 < w) : (Ring.empty w : Ring α).WF := by
  unfold Ring.WF
  exact ⟨hw, length_emptySlots w, hw, Nat.zero_le w, fun _ => rfl, [], rfl⟩

theorem empty_toList {α : Type} (w : Nat) : (Ring.empty w : Ring α).toList = [] := rfl

theorem foldl_wf {α : Type} : ∀ (xs : List α) (r : Ring α), r.WF → (xs.foldl Ring.push r).WF
  | [], _, h => h
  | x :: xs, r, h => foldl_wf xs (r.push x) (push_preserves_wf r x h)

theorem ring_foldl_toList {α : Type} (w : Nat) :
    ∀ (xs : List α) (r : Ring α), r.WF → r.w = w →
      (xs.foldl Ring.push r).toList = pushChunk w r.toList xs
  | [], _, _, _ => rfl
  | x :: xs, r, hwf, hrw => by
    show (xs.foldl Ring.push (r.push x)).toList = pushChunk w (step w r.toList x) xs
    rw [ring_foldl_toList w xs (r.push x) (push_preserves_wf r x hwf) ((push_w r x).trans hrw),
      push_simulates_step r x hwf, hrw]

/-- A whole stream through the ring equals the list model. -/
theorem ring_run_correct {α : Type} (w : Nat) (xs : List α) (hw : 0 < w) :
    (Ring.run w xs).toList = run w xs := by
  have h := ring_foldl_toList w xs (Ring.empty w) (empty_wf w hw) rfl
  rw [empty_toList] at h
  exact h

/-- ... and so the spec's window. -/
theorem ring_run_lastWindow {α : Type} (w : Nat) (xs : List α) (hw : 0 < w) :
    (Ring.run w xs).toList = lastWindow w xs := by
  rw [ring_run_correct w xs hw, run_correct]

/-! ## Where each position lives -/

theorem push_shape {α : Type} (r : Ring α) (x : α) (k : Nat)
    (hsize : r.size = min r.w k) (hhead : r.head = (k - r.size) % r.w) :
    (r.push x).size = min r.w (k + 1) ∧ (r.push x).head = (k + 1 - (r.push x).size) % r.w := by
  by_cases hs : r.size < r.w
  · rw [push_of_lt r x hs]
    show r.size + 1 = min r.w (k + 1) ∧ r.head = (k + 1 - (r.size + 1)) % r.w
    have e : k + 1 - (r.size + 1) = k - r.size := by omega
    refine ⟨by omega, ?_⟩
    rw [hhead, e]
  · rw [push_of_not_lt r x hs]
    show r.size = min r.w (k + 1) ∧ (r.head + 1) % r.w = (k + 1 - r.size) % r.w
    have e : k - r.size + 1 = k + 1 - r.size := by omega
    refine ⟨by omega, ?_⟩
    rw [hhead, Nat.mod_add_mod, e]

theorem foldl_shape {α : Type} (w : Nat) :
    ∀ (xs : List α) (r : Ring α) (k : Nat), r.w = w → r.size = min w k →
      r.head = (k - r.size) % w →
      (xs.foldl Ring.push r).w = w ∧ (xs.foldl Ring.push r).size = min w (k + xs.length) ∧
        (xs.foldl Ring.push r).head = (k + xs.length - (xs.foldl Ring.push r).size) % w
  | [], r, k, hrw, hs, hh => by
    show r.w = w ∧ r.size = min w (k + 0) ∧ r.head = (k + 0 - r.size) % w
    rw [Nat.add_zero]
    exact ⟨hrw, hs, hh⟩
  | x :: xs, r, k, hrw, hs, hh => by
    have hs2 : r.size = min r.w k := by rw [hrw]; exact hs
    have hh2 : r.head = (k - r.size) % r.w := by rw [hrw]; exact hh
    obtain ⟨hs', hh'⟩ := push_shape r x k hs2 hh2
    have hpw : (r.push x).w = w := (push_w r x).trans hrw
    rw [hrw] at hs' hh'
    have ih := foldl_shape w xs (r.push x) (k + 1) hpw hs' hh'
    have e : k + 1 + xs.length = k + (x :: xs).length := by
      show k + 1 + xs.length = k + (xs.length + 1)
      omega
    rw [e] at ih
    exact ih

theorem run_shape {α : Type} (w : Nat) (xs : List α) :
    (Ring.run w xs).w = w ∧ (Ring.run w xs).size = min w xs.length ∧
      (Ring.run w xs).head = (xs.length - (Ring.run w xs).size) % w := by
  have h := foldl_shape w xs (Ring.empty w) 0 rfl
    (by show 0 = min w 0; omega)
    (by show 0 = (0 - 0) % w; rw [Nat.zero_sub, Nat.zero_mod])
  rw [Nat.zero_add] at h
  exact h

theorem ring_run_natsFrom (w n : Nat) (hw : 0 < w) :
    (Ring.run w (natsFrom 0 n)).toList = natsFrom (n - min w n) (min w n) := by
  have e1 : 0 + (n - w) = n - min w n := by omega
  have e2 : n - (n - w) = min w n := by omega
  rw [ring_run_correct w (natsFrom 0 n) hw, run_correct]
  unfold lastWindow
  rw [length_natsFrom, drop_natsFrom, e1, e2]

theorem slot_of_facts (r : Ring Nat) (w n p : Nat) (hrw : r.w = w) (hsize : r.size = min w n)
    (hhead : r.head = (n - r.size) % w) (hwf : r.WF)
    (htl : r.toList = natsFrom (n - min w n) (min w n)) (hp : p < n) (hwin : n ≤ p + w) :
    getSlot r.buf (p % w) = some p := by
  unfold Ring.WF at hwf
  obtain ⟨_, _, _, _, _, vals, hvals⟩ := hwf
  have hvt : vals = natsFrom (n - min w n) (min w n) := by
    rw [← htl]
    show vals = somes r.reads
    rw [hvals, somes_map_some]
  rw [hvt] at hvals
  have hreads : (natsFrom 0 (min w n)).map (slotRead r.buf w r.head) =
      (natsFrom (n - min w n) (min w n)).map some := by
    rw [← hvals]
    show (natsFrom 0 (min w n)).map (slotRead r.buf w r.head) =
      (natsFrom 0 r.size).map (slotRead r.buf r.w r.head)
    rw [hrw, hsize]
  have hi : p - (n - min w n) < min w n := by omega
  have h3 : nthOpt ((natsFrom 0 (min w n)).map (slotRead r.buf w r.head)) (p - (n - min w n)) =
      nthOpt ((natsFrom (n - min w n) (min w n)).map some) (p - (n - min w n)) := by
    rw [hreads]
  rw [nthOpt_map_natsFrom (slotRead r.buf w r.head) 0 (min w n) (p - (n - min w n)) hi,
    nthOpt_map_natsFrom some (n - min w n) (min w n) (p - (n - min w n)) hi] at h3
  have h4 : slotRead r.buf w r.head (0 + (p - (n - min w n))) =
      some (n - min w n + (p - (n - min w n))) := Option.some.inj h3
  have e1 : n - min w n + (p - (n - min w n)) = p := by omega
  have hidx : (r.head + (0 + (p - (n - min w n)))) % w = p % w := by
    have e2 : n - min w n + (0 + (p - (n - min w n))) = p := by omega
    rw [hhead, hsize, Nat.mod_add_mod, e2]
  rw [e1] at h4
  unfold slotRead at h4
  rw [hidx] at h4
  exact h4

/-- Pushing positions `0 .. n-1` into a ring of `w` slots leaves every position `p`
still in the window (`n ≤ p + w`) in slot `p % w`. -/
theorem slot_eq_pos_mod (w n p : Nat) (hw : 0 < w) (hp : p < n) (hwin : n ≤ p + w) :
    getSlot (Ring.run w (natsFrom 0 n)).buf (p % w) = some p := by
  have hshape := run_shape w (natsFrom 0 n)
  rw [length_natsFrom] at hshape
  exact slot_of_facts (Ring.run w (natsFrom 0 n)) w n p hshape.1 hshape.2.1 hshape.2.2
    (foldl_wf (natsFrom 0 n) (Ring.empty w) (empty_wf w hw)) (ring_run_natsFrom w n hw) hp hwin

end KVWindow
