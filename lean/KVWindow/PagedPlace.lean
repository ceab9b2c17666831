import KVWindow.PagedFrame

/-!
# KVWindow.PagedPlace: placing one entry

An append writes its entry into block `c`, the block of logical block `len s / B` afterwards:
a fresh block (the entry was `none`), a copy of a shared block (copy on write), or the unshared
block itself. `holds_place` proves, from what the three cases have in common, that the pool still
holds every history, the appending sequence's extended by the entry: the written slot is the new
position, the other slots of `c` are what the old block held there, no other block changes, and
no other table entry names `c`. `place_facts` proves those facts of each case of `placeWith`.
-/

namespace KVWindow

open KVList KVArith

/-! ## Slots -/

theorem writeMem_same {α : Type} (m : Nat → Nat → Option α) (b i : Nat) (x : α) :
    writeMem m b i x b i = some x := by
  unfold writeMem
  exact ite_pos' (⟨rfl, rfl⟩ : b = b ∧ i = i) _ _

theorem writeMem_ne {α : Type} (m : Nat → Nat → Option α) (b i : Nat) (x : α) (b' i' : Nat)
    (h : ¬ (b' = b ∧ i' = i)) : writeMem m b i x b' i' = m b' i' := by
  unfold writeMem
  exact ite_neg' h _ _

theorem copyBlock_dst {α : Type} (m : Nat → Nat → Option α) (src dst i' : Nat) :
    copyBlock m src dst dst i' = m src i' := by
  unfold copyBlock
  exact ite_pos' (rfl : dst = dst) _ _

theorem copyBlock_ne {α : Type} (m : Nat → Nat → Option α) (src dst b' i' : Nat)
    (h : ¬ b' = dst) : copyBlock m src dst b' i' = m b' i' := by
  unfold copyBlock
  exact ite_neg' h _ _

/-! ## The appending sequence and the others -/

/-- The appending sequence `s` holds its history extended by `x`. -/
theorem content_place {α : Type} (W B : Nat) (P P1 : Pool α) (H : Nat → List α) (s c : Nat)
    (x : α) (hc : Content W B P H s) (hlen : P1.len = P.len)
    (ha1 : getSlot (P1.table s) (P.len s / B) = some c)
    (ha2 : ∀ j, ¬ j = P.len s / B → getSlot (P1.table s) j = getSlot (P.table s) j)
    (hw : P1.mem c (P.len s % B) = some x)
    (hcopy : ∀ b i, getSlot (P.table s) (P.len s / B) = some b → ¬ i = P.len s % B →
      P1.mem c i = P.mem b i)
    (hother : ∀ d i, ¬ d = c → P1.mem d i = P.mem d i)
    (huniq : ∀ j, getSlot (P.table s) j = some c → j = P.len s / B) :
    Content W B (bump P1 s) (upd H s (H s ++ [x])) s := by
  unfold Content at hc ⊢
  obtain ⟨hl, hq⟩ := hc
  have hn : (bump P1 s).len s = P.len s + 1 := by
    have e1 : (bump P1 s).len s = P1.len s + 1 := upd_same P1.len s (P1.len s + 1)
    have e2 : P1.len s = P.len s := congrArg (fun f => f s) hlen
    omega
  have hH : upd H s (H s ++ [x]) s = H s ++ [x] := upd_same H s (H s ++ [x])
  have hlenx := length_append_singleton (H s) x
  refine ⟨?_, ?_⟩
  · have e3 : (upd H s (H s ++ [x]) s).length = (H s ++ [x]).length := congrArg List.length hH
    omega
  · intro q h1 h2
    have h1' : q < P.len s + 1 := by omega
    have h2' : P.len s + 1 < q + W := by omega
    have hnth : nthOpt (H s ++ [x]) q = nthOpt (upd H s (H s ++ [x]) s) q :=
      congrArg (fun l => nthOpt l q) hH.symm
    by_cases hqn : q = P.len s
    · -- the new position: slot `len s % B` of block `c`
      have g1 : getSlot (P1.table s) (q / B) = some c :=
        (congrArg (fun v => getSlot (P1.table s) (v / B)) hqn).trans ha1
      have e4 : q = (H s).length := by omega
      have e5 : nthOpt (H s ++ [x]) q = some x :=
        (congrArg (nthOpt (H s ++ [x])) e4).trans (nthOpt_append_len (H s) x)
      have g2 : P1.mem c (q % B) = nthOpt (upd H s (H s ++ [x]) s) q :=
        ((congrArg (fun v => P1.mem c (v % B)) hqn).trans hw).trans (e5.symm.trans hnth)
      exact ⟨c, g1, g2⟩
    · -- an older position, needed before the append too
      have h1'' : q < P.len s := by omega
      have h2'' : P.len s < q + W := by omega
      obtain ⟨b, hb, hm⟩ := hq q h1'' h2''
      have hnth2 : nthOpt (H s ++ [x]) q = nthOpt (H s) q :=
        nthOpt_append_lt (H s) [x] q (by omega)
      have hm2 : P.mem b (q % B) = nthOpt (upd H s (H s ++ [x]) s) q :=
        hm.trans (hnth2.symm.trans hnth)
      by_cases hj : q / B = P.len s / B
      · -- the same logical block: it is now `c`, which holds what the old block held
        have hbj : getSlot (P.table s) (P.len s / B) = some b :=
          (congrArg (getSlot (P.table s)) hj).symm.trans hb
        have hne : ¬ q % B = P.len s % B := mod_ne_of_div_eq' q (P.len s) B hj hqn
        have g1 : getSlot (P1.table s) (q / B) = some c :=
          (congrArg (getSlot (P1.table s)) hj).trans ha1
        have g2 : P1.mem c (q % B) = nthOpt (upd H s (H s ++ [x]) s) q :=
          (hcopy b (q % B) hbj hne).trans hm2
        exact ⟨c, g1, g2⟩
      · -- another logical block: unchanged, and not `c`
        have g1 : getSlot (P1.table s) (q / B) = some b := (ha2 (q / B) hj).trans hb
        have hbc : ¬ b = c := fun e => hj (huniq (q / B) (hb.trans (congrArg some e)))
        have g2 : P1.mem b (q % B) = nthOpt (upd H s (H s ++ [x]) s) q :=
          (hother b (q % B) hbc).trans hm2
        exact ⟨b, g1, g2⟩

/-- Every other sequence keeps its history: its table is unchanged and does not name `c`. -/
theorem content_place_other {α : Type} (W B : Nat) (P P1 : Pool α) (H : Nat → List α)
    (s t c : Nat) (x : α) (hts : ¬ t = s) (hlen : P1.len = P.len) (htab : P1.table t = P.table t)
    (hother : ∀ d i, ¬ d = c → P1.mem d i = P.mem d i)
    (hnot : ∀ k, ¬ getSlot (P.table t) k = some c) (hc : Content W B P H t) :
    Content W B (bump P1 s) (upd H s (H s ++ [x])) t := by
  have hl : (bump P1 s).len t = P.len t := by
    have e1 : (bump P1 s).len t = P1.len t := upd_ne P1.len s (P1.len s + 1) t hts
    have e2 : P1.len t = P.len t := congrArg (fun f => f t) hlen
    omega
  refine content_frame W B P (bump P1 s) H (upd H s (H s ++ [x])) t t hl
    (upd_ne H s (H s ++ [x]) t hts)
    (fun q _ _ => congrArg (fun l => getSlot l (q / B)) htab) ?_ hc
  intro q b _ _ hb
  have hbc : ¬ b = c := fun e => hnot (q / B) (hb.trans (congrArg some e))
  exact hother b (q % B) hbc

/-- The pool after a placement (and `bump`) holds every history, `s`'s extended by `x`. -/
theorem holds_place {α : Type} (W B N : Nat) (P P1 : Pool α) (H : Nat → List α) (s c : Nat)
    (x : α) (h : PoolHolds W B N P H) (hwf1 : PoolWF N P1) (hlive : P1.live = P.live)
    (hlen : P1.len = P.len) (htab : ∀ t, ¬ t = s → P1.table t = P.table t)
    (ha1 : getSlot (P1.table s) (P.len s / B) = some c)
    (ha2 : ∀ j, ¬ j = P.len s / B → getSlot (P1.table s) j = getSlot (P.table s) j)
    (hw : P1.mem c (P.len s % B) = some x)
    (hcopy : ∀ b i, getSlot (P.table s) (P.len s / B) = some b → ¬ i = P.len s % B →
      P1.mem c i = P.mem b i)
    (hother : ∀ d i, ¬ d = c → P1.mem d i = P.mem d i)
    (huniq : ∀ t k, InL t P.live → getSlot (P.table t) k = some c → t = s ∧ k = P.len s / B) :
    PoolHolds W B N (bump P1 s) (upd H s (H s ++ [x])) := by
  have hcont := poolHolds_content W B N P H h
  refine poolHolds_intro W B N (bump P1 s) (upd H s (H s ++ [x]))
    (poolWF_frame N P1 (bump P1 s) rfl rfl rfl hwf1) (fun t ht => ?_)
  have ht' : InL t P.live := by
    have ht1 : InL t P1.live := ht
    rw [hlive] at ht1
    exact ht1
  by_cases hts : t = s
  · have hs : InL s P.live := by rw [← hts]; exact ht'
    have hcs : Content W B P H s := hcont s hs
    have hu : ∀ j, getSlot (P.table s) j = some c → j = P.len s / B :=
      fun j hj => (huniq s j hs hj).2
    have hres := content_place W B P P1 H s c x hcs hlen ha1 ha2 hw hcopy hother hu
    rw [hts]
    exact hres
  · have hnot : ∀ k, ¬ getSlot (P.table t) k = some c :=
      fun k hk => hts (huniq t k ht' hk).1
    exact content_place_other W B P P1 H s t c x hts hlen (htab t hts) hother hnot (hcont t ht')

/-- Taking the first free block `c` for entry `j` of `s` (whose old entry, if any, is a shared
block) keeps the free list right. -/
theorem wf_take {α : Type} (N : Nat) (P : Pool α) (s j c : Nat) (rest : List Nat)
    (m : Nat → Nat → Option α) (hwf : PoolWF N P) (hs : InL s P.live) (hfree : P.free = c :: rest)
    (hold : ∀ b, getSlot (P.table s) j = some b → 2 ≤ refcount P b) :
    PoolWF N { P with free := rest, table := upd P.table s (setExt (P.table s) j (some c)),
                      mem := m } := by
  obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
  have hcin : InL c P.free := by
    rw [hfree]
    exact (inL_cons c c rest).2 (Or.inl rfl)
  obtain ⟨hcN, hcun⟩ := free_unreferenced N P hwf c hcin
  have hfnd2 : ¬ InL c rest ∧ NoDupL rest := by
    have h0 : NoDupL (c :: rest) := by rw [← hfree]; exact hfnd
    exact h0
  have hold0 : ind c (getSlot (P.table s) j) = 0 := ind_of_ne c _ (fun e => hcun s hs j e)
  have hrc0 : refcount P c = 0 := ((hfr c).1 hcin).2
  -- the count after the entry is written
  have hcount : ∀ d, refsIn (upd P.table s (setExt (P.table s) j (some c))) d P.live +
      ind d (getSlot (P.table s) j) = refcount P d + ind d (some c) := by
    intro d
    have e1 := refsIn_upd P.table d s (setExt (P.table s) j (some c)) P.live hnd hs
    have e2 := countIn_setExt d (P.table s) j (some c)
    have e3 : refcount P d = refsIn P.table d P.live := rfl
    omega
  have h1 : NoDupL P.live := hnd
  have h3 : ∀ d, InL d rest ↔ (d < N ∧
      refsIn (upd P.table s (setExt (P.table s) j (some c))) d P.live = 0) := by
    intro d
    have hcd := hcount d
    by_cases hdc : d = c
    · rw [hdc]
      have hc1 := hcount c
      have hi : ind c (some c) = 1 := ind_self c
      constructor
      · intro hin
        exact absurd hin hfnd2.1
      · intro h5
        have h6 := h5.2
        exact False.elim (by omega)
    · have hi : ind d (some c) = 0 := ind_ne d c (fun e => hdc e.symm)
      have hfd : InL d P.free ↔ InL d rest := by
        rw [hfree]
        constructor
        · intro h5
          cases (inL_cons d c rest).1 h5 with
          | inl e => exact absurd e.symm hdc
          | inr h6 => exact h6
        · intro h5
          exact (inL_cons d c rest).2 (Or.inr h5)
      by_cases hod : getSlot (P.table s) j = some d
      · have h2d := hold d hod
        have hi2 : ind d (getSlot (P.table s) j) = 1 := ind_of_eq d _ hod
        constructor
        · intro hin
          have h7 := ((hfr d).1 (hfd.2 hin)).2
          exact False.elim (by omega)
        · intro h5
          have h7 := h5.2
          exact False.elim (by omega)
      · have hi2 : ind d (getSlot (P.table s) j) = 0 := ind_of_ne d _ hod
        constructor
        · intro hin
          have h7 := (hfr d).1 (hfd.2 hin)
          have h8 := h7.2
          exact ⟨h7.1, by omega⟩
        · intro h5
          have h8 := h5.2
          exact hfd.1 ((hfr d).2 ⟨h5.1, by omega⟩)
  have h4 : RefsOK N { P with
      free := rest, table := upd P.table s (setExt (P.table s) j (some c)),
      mem := m } := by
    unfold RefsOK
    intro t ht k b hk
    have ht' : InL t P.live := ht
    by_cases hts : t = s
    · have e1 : upd P.table s (setExt (P.table s) j (some c)) t = setExt (P.table s) j (some c) :=
        (congrArg (upd P.table s (setExt (P.table s) j (some c))) hts).trans (upd_same _ _ _)
      have hk1 : getSlot (setExt (P.table s) j (some c)) k = some b :=
        (congrArg (fun l => getSlot l k) e1).symm.trans hk
      by_cases hkj : k = j
      · have e2 : getSlot (setExt (P.table s) j (some c)) k = some c :=
          (congrArg (getSlot (setExt (P.table s) j (some c))) hkj).trans
            (getSlot_setExt_same (P.table s) j (some c))
        have e3 : some c = some b := e2.symm.trans hk1
        have e4 : c = b := Option.some.inj e3
        rw [← e4]
        exact hcN
      · have e2 := getSlot_setExt_ne (P.table s) j k (some c) hkj
        exact refsOK_at N P hrefs s k b hs (e2.symm.trans hk1)
    · have e1 : upd P.table s (setExt (P.table s) j (some c)) t = P.table t :=
        upd_ne P.table s (setExt (P.table s) j (some c)) t hts
      exact refsOK_at N P hrefs t k b ht' ((congrArg (fun l => getSlot l k) e1).symm.trans hk)
  exact poolWF_intro N { P with
      free := rest, table := upd P.table s (setExt (P.table s) j (some c)),
      mem := m } h1 hfnd2.2 h3 h4

/-! ## The three cases of `placeWith` -/

/-- A fresh or copied block `c` taken off the free list for entry `len s / B` of `s` (`P1`'s
fields given by equations): every fact `holds_place` needs but the slots. -/
theorem take_facts {α : Type} (N : Nat) (P P1 : Pool α) (s c : Nat) (rest : List Nat) (B : Nat)
    (m : Nat → Nat → Option α) (hwf : PoolWF N P) (hs : InL s P.live) (hf : P.free = c :: rest)
    (hold : ∀ b, getSlot (P.table s) (P.len s / B) = some b → 2 ≤ refcount P b)
    (e : { P with
      free := rest, table := upd P.table s (setExt (P.table s) (P.len s / B) (some c)),
      mem := m } = P1) :
    PoolWF N P1 ∧ P1.live = P.live ∧ P1.len = P.len ∧ P1.mem = m ∧
      (∀ t, ¬ t = s → P1.table t = P.table t) ∧
      getSlot (P1.table s) (P.len s / B) = some c ∧
      (∀ j, ¬ j = P.len s / B → getSlot (P1.table s) j = getSlot (P.table s) j) ∧
      (∀ t k, InL t P.live → getSlot (P.table t) k = some c → t = s ∧ k = P.len s / B) := by
  have et : P1.table = upd P.table s (setExt (P.table s) (P.len s / B) (some c)) :=
    (congrArg Pool.table e).symm
  have hwf1 : PoolWF N P1 := by
    rw [← e]
    exact wf_take N P s (P.len s / B) c rest m hwf hs hf hold
  have hcin : InL c P.free := by
    rw [hf]
    exact (inL_cons c c rest).2 (Or.inl rfl)
  obtain ⟨_, hcun⟩ := free_unreferenced N P hwf c hcin
  have hts : ∀ t, ¬ t = s → P1.table t = P.table t := by
    intro t ht
    rw [et]
    exact upd_ne P.table s (setExt (P.table s) (P.len s / B) (some c)) t ht
  have hs1 : P1.table s = setExt (P.table s) (P.len s / B) (some c) := by
    rw [et]
    exact upd_same P.table s (setExt (P.table s) (P.len s / B) (some c))
  have ha1 : getSlot (P1.table s) (P.len s / B) = some c := by
    rw [hs1]
    exact getSlot_setExt_same (P.table s) (P.len s / B) (some c)
  have ha2 : ∀ j, ¬ j = P.len s / B → getSlot (P1.table s) j = getSlot (P.table s) j := by
    intro j hj
    rw [hs1]
    exact getSlot_setExt_ne (P.table s) (P.len s / B) j (some c) hj
  exact ⟨hwf1, (congrArg Pool.live e).symm, (congrArg Pool.len e).symm, (congrArg Pool.mem e).symm,
    hts, ha1, ha2, fun t k ht hk => absurd hk (hcun t ht k)⟩

/-- A placement that succeeds keeps every history (`s`'s extended by `x`) once counted. -/
theorem holds_placeWith {α : Type} (W B N : Nat) (P P1 : Pool α) (H : Nat → List α) (s : Nat)
    (x : α) (h : PoolHolds W B N P H) (hs : InL s P.live)
    (hp : placeWith P s (P.len s / B) (P.len s % B) x (getSlot (P.table s) (P.len s / B)) =
      some P1) :
    PoolHolds W B N (bump P1 s) (upd H s (H s ++ [x])) ∧ P1.live = P.live := by
  have hwf := poolHolds_wf W B N P H h
  cases hg : getSlot (P.table s) (P.len s / B) with
  | none =>
    -- a fresh block
    rw [hg] at hp
    have hp2 : takeWith P s (P.len s / B) (fun c => writeMem P.mem c (P.len s % B) x) P.free =
        some P1 := hp
    cases hf : P.free with
    | nil =>
      rw [hf] at hp2
      exact absurd hp2 (none_ne_some' P1)
    | cons c rest =>
      rw [hf] at hp2
      have hp3 : some { P with
          free := rest,
          table := upd P.table s (setExt (P.table s) (P.len s / B) (some c)),
          mem := writeMem P.mem c (P.len s % B) x } = some P1 := hp2
      obtain ⟨hwf1, hlive, hlen, hmem, htab, ha1, ha2, huniq⟩ :=
        take_facts N P P1 s c rest B (writeMem P.mem c (P.len s % B) x) hwf hs hf
          (fun b hb => absurd (hg.symm.trans hb) (none_ne_some' b)) (Option.some.inj hp3)
      have hw : P1.mem c (P.len s % B) = some x := by
        rw [hmem]
        exact writeMem_same P.mem c (P.len s % B) x
      have hcopy : ∀ b i, getSlot (P.table s) (P.len s / B) = some b → ¬ i = P.len s % B →
          P1.mem c i = P.mem b i :=
        fun b _ hb _ => absurd (hg.symm.trans hb) (none_ne_some' b)
      have hother : ∀ d i, ¬ d = c → P1.mem d i = P.mem d i := by
        intro d i hd
        rw [hmem]
        exact writeMem_ne P.mem c (P.len s % B) x d i (fun hh => hd hh.1)
      exact ⟨holds_place W B N P P1 H s c x h hwf1 hlive hlen htab ha1 ha2 hw hcopy hother huniq,
        hlive⟩
  | some b =>
    rw [hg] at hp
    have hp2 : (if 2 ≤ refcount P b then
        takeWith P s (P.len s / B) (fun c => writeMem (copyBlock P.mem b c) c (P.len s % B) x) P.free
        else some { P with mem := writeMem P.mem b (P.len s % B) x }) = some P1 := hp
    have hbb : ∀ b', getSlot (P.table s) (P.len s / B) = some b' → b = b' :=
      fun b' hb' => Option.some.inj (hg.symm.trans hb')
    by_cases h2 : 2 ≤ refcount P b
    · -- copy on write: the shared block `b` is copied into a fresh one
      have hp3 : takeWith P s (P.len s / B)
          (fun c => writeMem (copyBlock P.mem b c) c (P.len s % B) x) P.free = some P1 :=
        (ite_pos' h2 _ _).symm.trans hp2
      cases hf : P.free with
      | nil =>
        rw [hf] at hp3
        exact absurd hp3 (none_ne_some' P1)
      | cons c rest =>
        rw [hf] at hp3
        have hp4 : some { P with
            free := rest,
            table := upd P.table s (setExt (P.table s) (P.len s / B) (some c)),
            mem := writeMem (copyBlock P.mem b c) c (P.len s % B) x } = some P1 := hp3
        have hold : ∀ b', getSlot (P.table s) (P.len s / B) = some b' → 2 ≤ refcount P b' := by
          intro b' hb'
          rw [← hbb b' hb']
          exact h2
        obtain ⟨hwf1, hlive, hlen, hmem, htab, ha1, ha2, huniq⟩ :=
          take_facts N P P1 s c rest B (writeMem (copyBlock P.mem b c) c (P.len s % B) x) hwf hs
            hf hold (Option.some.inj hp4)
        have hw : P1.mem c (P.len s % B) = some x := by
          rw [hmem]
          exact writeMem_same (copyBlock P.mem b c) c (P.len s % B) x
        have hcopy : ∀ b' i, getSlot (P.table s) (P.len s / B) = some b' → ¬ i = P.len s % B →
            P1.mem c i = P.mem b' i := by
          intro b' i hb' hi
          rw [hmem, ← hbb b' hb']
          exact (writeMem_ne (copyBlock P.mem b c) c (P.len s % B) x c i (fun hh => hi hh.2)).trans
            (copyBlock_dst P.mem b c i)
        have hother : ∀ d i, ¬ d = c → P1.mem d i = P.mem d i := by
          intro d i hd
          rw [hmem]
          exact (writeMem_ne (copyBlock P.mem b c) c (P.len s % B) x d i (fun hh => hd hh.1)).trans
            (copyBlock_ne P.mem b c d i hd)
        exact ⟨holds_place W B N P P1 H s c x h hwf1 hlive hlen htab ha1 ha2 hw hcopy hother huniq,
          hlive⟩
    · -- in place: `b` is referenced only here
      have hp3 : some { P with mem := writeMem P.mem b (P.len s % B) x } = some P1 :=
        (ite_neg' h2 _ _).symm.trans hp2
      have e := Option.some.inj hp3
      have hmem : P1.mem = writeMem P.mem b (P.len s % B) x := (congrArg Pool.mem e).symm
      have hlive : P1.live = P.live := (congrArg Pool.live e).symm
      have hlen : P1.len = P.len := (congrArg Pool.len e).symm
      have hfree : P1.free = P.free := (congrArg Pool.free e).symm
      have htab0 : P1.table = P.table := (congrArg Pool.table e).symm
      have hwf1 : PoolWF N P1 := poolWF_frame N P P1 hlive hfree htab0 hwf
      have htab : ∀ t, ¬ t = s → P1.table t = P.table t := fun t _ => congrArg (fun f => f t) htab0
      have ha1 : getSlot (P1.table s) (P.len s / B) = some b := by
        rw [htab0]
        exact hg
      have ha2 : ∀ j, ¬ j = P.len s / B → getSlot (P1.table s) j = getSlot (P.table s) j :=
        fun j _ => congrArg (fun l => getSlot (l s) j) htab0
      have hw : P1.mem b (P.len s % B) = some x := by
        rw [hmem]
        exact writeMem_same P.mem b (P.len s % B) x
      have hcopy : ∀ b' i, getSlot (P.table s) (P.len s / B) = some b' → ¬ i = P.len s % B →
          P1.mem b i = P.mem b' i := by
        intro b' i hb' hi
        rw [hmem, ← hbb b' hb']
        exact writeMem_ne P.mem b (P.len s % B) x b i (fun hh => hi hh.2)
      have hother : ∀ d i, ¬ d = b → P1.mem d i = P.mem d i := by
        intro d i hd
        rw [hmem]
        exact writeMem_ne P.mem b (P.len s % B) x d i (fun hh => hd hh.1)
      exact ⟨holds_place W B N P P1 H s b x h hwf1 hlive hlen htab ha1 ha2 hw hcopy hother
        (refcount_unique P s (P.len s / B) b hs hg h2), hlive⟩

end KVWindow
