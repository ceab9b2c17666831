import KVWindow.PagedAppend

/-!
# KVWindow.PagedOps: new sequences, `free`, every op, every run

* a new live sequence (`add`, `fork`, `admit`) adds its table's entries to the counts
  (`refcount_new`);
* `free` releases the entries of the table one by one (`dropHead`, `dropAll`: each a release of
  one reference) and then drops the sequence from the live list (`unlive`);
* `holds_apply`: every successful op keeps `PoolHolds` with the histories `Op.hist` gives, and
  keeps every other live sequence live; `holds_runOps`: so does every run.
-/

namespace KVWindow

open KVList KVArith

/-! ## A new live sequence -/

/-- A new live sequence with table `l`: every count grows by `l`'s. -/
theorem refcount_new {α : Type} (P P' : Pool α) (s : Nat) (l : List (Option Nat))
    (hs : ¬ InL s P.live) (hlive : P'.live = s :: P.live) (htab : P'.table = upd P.table s l)
    (d : Nat) : refcount P' d = countIn d l + refcount P d := by
  have e1 : refcount P' d = refsIn P'.table d P'.live := rfl
  have e2 : refsIn P'.table d P'.live = refsIn (upd P.table s l) d (s :: P.live) := by
    rw [htab, hlive]
  have e3 : refsIn (upd P.table s l) d (s :: P.live) =
      countIn d (upd P.table s l s) + refsIn (upd P.table s l) d P.live := rfl
  have e4 : countIn d (upd P.table s l s) = countIn d l := congrArg (countIn d) (upd_same P.table s l)
  have e5 := refsIn_upd_out P.table d s l P.live hs
  have e6 : refcount P d = refsIn P.table d P.live := rfl
  omega

/-- A new live sequence whose table references blocks in range keeps references in range. -/
theorem refsOK_new {α : Type} (N : Nat) (P P' : Pool α) (s : Nat) (l : List (Option Nat))
    (h : RefsOK N P) (hl : ∀ j b, getSlot l j = some b → b < N)
    (hlive : P'.live = s :: P.live) (htab : P'.table = upd P.table s l) : RefsOK N P' := by
  unfold RefsOK
  intro t ht j b hb
  have ht1 : InL t (s :: P.live) := by
    rw [← hlive]
    exact ht
  have hb1 : getSlot (upd P.table s l t) j = some b := by
    rw [← htab]
    exact hb
  by_cases hts : t = s
  · have e : upd P.table s l t = l := (congrArg (upd P.table s l) hts).trans (upd_same P.table s l)
    exact hl j b ((congrArg (fun x => getSlot x j) e).symm.trans hb1)
  · have e : upd P.table s l t = P.table t := upd_ne P.table s l t hts
    have ht2 : InL t P.live :=
      ((inL_cons t s P.live).1 ht1).elim (fun e' => absurd e'.symm hts) (fun h' => h')
    exact refsOK_at N P h t j b ht2 ((congrArg (fun x => getSlot x j) e).symm.trans hb1)

/-- A live sequence other than the new one keeps its history. -/
theorem content_new_other {α : Type} (W B : Nat) (P P' : Pool α) (H : Nat → List α) (s t : Nat)
    (v : List α) (n : Nat) (l : List (Option Nat)) (hts : ¬ t = s)
    (hlen : P'.len = upd P.len s n) (htab : P'.table = upd P.table s l) (hmem : P'.mem = P.mem)
    (hc : Content W B P H t) : Content W B P' (upd H s v) t := by
  have hl : P'.len t = P.len t := by
    rw [hlen]
    exact upd_ne P.len s n t hts
  have ht : P'.table t = P.table t := by
    rw [htab]
    exact upd_ne P.table s l t hts
  exact content_same W B P P' H (upd H s v) t hl (upd_ne H s v t hts) ht hmem hc

/-- Membership in a list with a new head. -/
theorem inL_new (s t : Nat) (l l' : List Nat) (hl : l' = s :: l) (ht : InL t l') (hts : ¬ t = s) :
    InL t l := by
  rw [hl] at ht
  exact ((inL_cons t s l).1 ht).elim (fun e => absurd e.symm hts) (fun h => h)

theorem inL_new_old (s t : Nat) (l l' : List Nat) (hl : l' = s :: l) (ht : InL t l) : InL t l' := by
  rw [hl]
  exact (inL_cons t s l).2 (Or.inr ht)

/-! ## `add` and `fork` -/

theorem holds_addSeq {α : Type} (W B N : Nat) (P P' : Pool α) (H : Nat → List α) (s : Nat)
    (h : PoolHolds W B N P H) (hr : addSeq P s = some P') :
    PoolHolds W B N P' (upd H s []) ∧ (∀ t, InL t P.live → InL t P'.live) := by
  by_cases hc : memN s P.live = true
  · have e : addSeq P s = none := by
      unfold addSeq
      exact ite_pos' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')
  · have e : addSeq P s = some { P with live := s :: P.live, table := upd P.table s [],
        len := upd P.len s 0, ident := upd P.ident s 0 } := by
      unfold addSeq
      exact ite_neg' hc _ _
    rw [e] at hr
    have e2 := Option.some.inj hr
    have hs : ¬ InL s P.live := memN_false s P.live hc
    have hlive : P'.live = s :: P.live := (congrArg Pool.live e2).symm
    have htab : P'.table = upd P.table s [] := (congrArg Pool.table e2).symm
    have hlen : P'.len = upd P.len s 0 := (congrArg Pool.len e2).symm
    have hmem : P'.mem = P.mem := (congrArg Pool.mem e2).symm
    have hfree : P'.free = P.free := (congrArg Pool.free e2).symm
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
    have h1 : NoDupL P'.live := by
      rw [hlive]
      exact (noDupL_cons s P.live).2 ⟨hs, hnd⟩
    have h2 : NoDupL P'.free := by
      rw [hfree]
      exact hfnd
    have h3 : ∀ d, InL d P'.free ↔ (d < N ∧ refcount P' d = 0) := by
      intro d
      have e3 := refcount_new P P' s [] hs hlive htab d
      have e4 : countIn d ([] : List (Option Nat)) = 0 := rfl
      rw [hfree]
      constructor
      · intro hin
        have h6 := (hfr d).1 hin
        have h7 := h6.2
        exact ⟨h6.1, by omega⟩
      · intro h5
        have h7 := h5.2
        exact (hfr d).2 ⟨h5.1, by omega⟩
    have h4 : RefsOK N P' :=
      refsOK_new N P P' s [] hrefs (fun j b hb => absurd ((getSlot_nil j).symm.trans hb)
        (none_ne_some' b)) hlive htab
    refine ⟨poolHolds_intro W B N P' (upd H s []) (poolWF_intro N P' h1 h2 h3 h4) (fun t ht => ?_),
      fun t ht => inL_new_old s t P.live P'.live hlive ht⟩
    by_cases hts : t = s
    · rw [hts]
      unfold Content
      have el : P'.len s = 0 := by
        rw [hlen]
        exact upd_same P.len s 0
      have eh : (upd H s [] s).length = 0 := (congrArg List.length (upd_same H s [])).trans rfl
      refine ⟨by omega, ?_⟩
      intro q hq _
      exact False.elim (by omega)
    · exact content_new_other W B P P' H s t [] 0 [] hts hlen htab hmem
        (hcont t (inL_new s t P.live P'.live hlive ht hts))

theorem holds_forkSeq {α : Type} (W B N : Nat) (P P' : Pool α) (H : Nat → List α)
    (src dst : Nat) (h : PoolHolds W B N P H) (hr : forkSeq P src dst = some P') :
    PoolHolds W B N P' (upd H dst (H src)) ∧ (∀ t, InL t P.live → InL t P'.live) := by
  by_cases hc : memN src P.live = true ∧ ¬ memN dst P.live = true
  · have e : forkSeq P src dst = some { P with live := dst :: P.live,
        table := upd P.table dst (P.table src), len := upd P.len dst (P.len src),
        ident := upd P.ident dst (P.ident src) } := by
      unfold forkSeq
      exact ite_pos' hc _ _
    rw [e] at hr
    have e2 := Option.some.inj hr
    have hsrc : InL src P.live := (memN_iff src P.live).1 hc.1
    have hdst : ¬ InL dst P.live := memN_false dst P.live hc.2
    have hlive : P'.live = dst :: P.live := (congrArg Pool.live e2).symm
    have htab : P'.table = upd P.table dst (P.table src) := (congrArg Pool.table e2).symm
    have hlen : P'.len = upd P.len dst (P.len src) := (congrArg Pool.len e2).symm
    have hmem : P'.mem = P.mem := (congrArg Pool.mem e2).symm
    have hfree : P'.free = P.free := (congrArg Pool.free e2).symm
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
    have h1 : NoDupL P'.live := by
      rw [hlive]
      exact (noDupL_cons dst P.live).2 ⟨hdst, hnd⟩
    have h2 : NoDupL P'.free := by
      rw [hfree]
      exact hfnd
    have h3 : ∀ d, InL d P'.free ↔ (d < N ∧ refcount P' d = 0) := by
      intro d
      have e3 := refcount_new P P' dst (P.table src) hdst hlive htab d
      have e4 := refsIn_ge P.table d src P.live hsrc
      have e5 : refcount P d = refsIn P.table d P.live := rfl
      rw [hfree]
      constructor
      · intro hin
        have h6 := (hfr d).1 hin
        have h7 := h6.2
        exact ⟨h6.1, by omega⟩
      · intro h5
        have h7 := h5.2
        exact (hfr d).2 ⟨h5.1, by omega⟩
    have h4 : RefsOK N P' :=
      refsOK_new N P P' dst (P.table src) hrefs (fun j b hb => refsOK_at N P hrefs src j b hsrc hb)
        hlive htab
    refine ⟨poolHolds_intro W B N P' (upd H dst (H src)) (poolWF_intro N P' h1 h2 h3 h4)
      (fun t ht => ?_), fun t ht => inL_new_old dst t P.live P'.live hlive ht⟩
    by_cases htd : t = dst
    · rw [htd]
      have hl : P'.len dst = P.len src := by
        rw [hlen]
        exact upd_same P.len dst (P.len src)
      have ht : P'.table dst = P.table src := by
        rw [htab]
        exact upd_same P.table dst (P.table src)
      exact content_frame W B P P' H (upd H dst (H src)) src dst hl (upd_same H dst (H src))
        (fun q _ _ => congrArg (fun l => getSlot l (q / B)) ht)
        (fun q b _ _ _ => congrArg (fun m => m b (q % B)) hmem) (hcont src hsrc)
    · exact content_new_other W B P P' H dst t (H src) (P.len src) (P.table src) htd hlen htab hmem
        (hcont t (inL_new dst t P.live P'.live hlive ht htd))
  · have e : forkSeq P src dst = none := by
      unfold forkSeq
      exact ite_neg' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')
