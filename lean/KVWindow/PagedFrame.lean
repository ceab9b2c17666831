import KVWindow.PagedCount

/-!
# KVWindow.PagedFrame: what each pool step keeps

The steps the ops are made of, one lemma each, over abstract pools (a pool built by `{ P with
.. }` is passed in with its field equations, proved by `rfl` at the call site):

* `content_frame`: a sequence keeps its history when its length, the table entries of the
  positions it needs and the slots they name are unchanged;
* `poolWF_same_counts`, `wf_release`: a table change that keeps every refcount keeps the free
  list right, and so does one that drops one reference to a block `b` followed by
  `pushIfUnref b`;
* `wf_take`: taking the first free block for an entry keeps it right.
-/

namespace KVWindow

open KVList KVArith

/-! ## Building the invariants from their parts -/

theorem poolWF_intro {α : Type} (N : Nat) (P : Pool α) (h1 : NoDupL P.live) (h2 : NoDupL P.free)
    (h3 : ∀ b, InL b P.free ↔ (b < N ∧ refcount P b = 0)) (h4 : RefsOK N P) : PoolWF N P := by
  unfold PoolWF FreeOK
  exact ⟨h1, ⟨h2, h3⟩, h4⟩

theorem poolHolds_intro {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α)
    (h1 : PoolWF N P) (h2 : ∀ t, InL t P.live → Content W B P H t) : PoolHolds W B N P H := by
  unfold PoolHolds
  exact ⟨h1, h2⟩

theorem poolHolds_wf {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α)
    (h : PoolHolds W B N P H) : PoolWF N P := by
  unfold PoolHolds at h
  exact h.1

theorem poolHolds_content {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α)
    (h : PoolHolds W B N P H) : ∀ t, InL t P.live → Content W B P H t := by
  unfold PoolHolds at h
  exact h.2

theorem poolWF_parts {α : Type} (N : Nat) (P : Pool α) (h : PoolWF N P) :
    NoDupL P.live ∧ NoDupL P.free ∧ (∀ b, InL b P.free ↔ (b < N ∧ refcount P b = 0)) ∧
      RefsOK N P := by
  unfold PoolWF FreeOK at h
  exact ⟨h.1, h.2.1.1, h.2.1.2, h.2.2⟩

/-- A referenced block is one of the `N` blocks. -/
theorem refsOK_at {α : Type} (N : Nat) (P : Pool α) (h : RefsOK N P) (t j b : Nat)
    (ht : InL t P.live) (hb : getSlot (P.table t) j = some b) : b < N := by
  unfold RefsOK at h
  exact h t ht j b hb

/-- A block on the free list is referenced by no live table. -/
theorem free_unreferenced {α : Type} (N : Nat) (P : Pool α) (hwf : PoolWF N P) (c : Nat)
    (hc : InL c P.free) : c < N ∧ ∀ t, InL t P.live → ∀ j, ¬ getSlot (P.table t) j = some c := by
  obtain ⟨_, _, hfree, _⟩ := poolWF_parts N P hwf
  have h := (hfree c).1 hc
  exact ⟨h.1, (refcount_zero P c).1 h.2⟩

/-! ## Content frames -/

/-- A sequence keeps its history (`t` in `P`, `t'` in `P'`, possibly different, for `fork`). -/
theorem content_frame {α : Type} (W B : Nat) (P P' : Pool α) (H H' : Nat → List α) (t t' : Nat)
    (hl : P'.len t' = P.len t) (hH : H' t' = H t)
    (ht : ∀ q, q < P.len t → P.len t < q + W →
      getSlot (P'.table t') (q / B) = getSlot (P.table t) (q / B))
    (hm : ∀ q b, q < P.len t → P.len t < q + W → getSlot (P.table t) (q / B) = some b →
      P'.mem b (q % B) = P.mem b (q % B))
    (hc : Content W B P H t) : Content W B P' H' t' := by
  unfold Content at hc ⊢
  obtain ⟨hlen, hq⟩ := hc
  refine ⟨?_, ?_⟩
  · have e1 : (H' t').length = (H t).length := congrArg List.length hH
    omega
  · intro q h1 h2
    have h1' : q < P.len t := by omega
    have h2' : P.len t < q + W := by omega
    obtain ⟨b, hb, hmem⟩ := hq q h1' h2'
    refine ⟨b, (ht q h1' h2').trans hb, ?_⟩
    have e2 : nthOpt (H t) q = nthOpt (H' t') q := congrArg (fun l => nthOpt l q) hH.symm
    exact (hm q b h1' h2' hb).trans (hmem.trans e2)

/-- The common case: length, table and slots of `t` all unchanged. -/
theorem content_same {α : Type} (W B : Nat) (P P' : Pool α) (H H' : Nat → List α) (t : Nat)
    (hl : P'.len t = P.len t) (hH : H' t = H t) (ht : P'.table t = P.table t)
    (hm : P'.mem = P.mem) (hc : Content W B P H t) : Content W B P' H' t :=
  content_frame W B P P' H H' t t hl hH
    (fun q _ _ => congrArg (fun l => getSlot l (q / B)) ht)
    (fun q b _ _ _ => congrArg (fun m => m b (q % B)) hm) hc

/-- `PoolHolds` only depends on the histories of the live sequences. -/
theorem poolHolds_congr {α : Type} (W B N : Nat) (P : Pool α) (H H' : Nat → List α)
    (h : PoolHolds W B N P H) (hH : ∀ t, H' t = H t) : PoolHolds W B N P H' :=
  poolHolds_intro W B N P H' (poolHolds_wf W B N P H h) (fun t ht =>
    content_same W B P P H H' t rfl (hH t) rfl rfl (poolHolds_content W B N P H h t ht))

/-! ## Well-formedness frames -/

/-- Same live list, free list and tables: the same invariant. -/
theorem poolWF_frame {α : Type} (N : Nat) (P P' : Pool α) (hlive : P'.live = P.live)
    (hfree : P'.free = P.free) (htab : P'.table = P.table) (h : PoolWF N P) : PoolWF N P' := by
  obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P h
  have hrc : ∀ b, refcount P' b = refcount P b := by
    intro b
    calc refcount P' b = refsIn P'.table b P'.live := rfl
      _ = refsIn P.table b P.live := by rw [htab, hlive]
      _ = refcount P b := rfl
  have h1 : NoDupL P'.live := by rw [hlive]; exact hnd
  have h2 : NoDupL P'.free := by rw [hfree]; exact hfnd
  have h3 : ∀ b, InL b P'.free ↔ (b < N ∧ refcount P' b = 0) := by
    intro b
    rw [hfree, hrc b]
    exact hfr b
  have h4 : RefsOK N P' := by
    unfold RefsOK
    intro t ht j b hb
    have ht' : InL t P.live := by rw [← hlive]; exact ht
    have hb' : getSlot (P.table t) j = some b := by rw [← htab]; exact hb
    exact refsOK_at N P hrefs t j b ht' hb'
  exact poolWF_intro N P' h1 h2 h3 h4

/-- Tables changed, but every refcount kept (and references still in range): the same
invariant. -/
theorem poolWF_same_counts {α : Type} (N : Nat) (P P1 : Pool α) (hwf : PoolWF N P)
    (hlive : P1.live = P.live) (hfree : P1.free = P.free) (hrefs : RefsOK N P1)
    (hcount : ∀ d, refcount P1 d = refcount P d) : PoolWF N P1 := by
  obtain ⟨hnd, hfnd, hfr, _⟩ := poolWF_parts N P hwf
  have h1 : NoDupL P1.live := by rw [hlive]; exact hnd
  have h2 : NoDupL P1.free := by rw [hfree]; exact hfnd
  have h3 : ∀ d, InL d P1.free ↔ (d < N ∧ refcount P1 d = 0) := by
    intro d
    rw [hfree, hcount d]
    exact hfr d
  exact poolWF_intro N P1 h1 h2 h3 hrefs

/-! ## Releasing one reference -/

theorem pushIfUnref_of_zero {α : Type} (P : Pool α) (b : Nat) (h : refcount P b = 0) :
    pushIfUnref P b = { P with free := P.free ++ [b] } := by
  unfold pushIfUnref
  exact ite_pos' h _ _

theorem pushIfUnref_of_ne {α : Type} (P : Pool α) (b : Nat) (h : ¬ refcount P b = 0) :
    pushIfUnref P b = P := by
  unfold pushIfUnref
  exact ite_neg' h _ _

/-- `pushIfUnref` only touches the free list. -/
theorem pushIfUnref_fields {α : Type} (P : Pool α) (b : Nat) :
    (pushIfUnref P b).live = P.live ∧ (pushIfUnref P b).table = P.table ∧
      (pushIfUnref P b).len = P.len ∧ (pushIfUnref P b).mem = P.mem := by
  by_cases h : refcount P b = 0
  · have e := pushIfUnref_of_zero P b h
    refine ⟨?_, ?_, ?_, ?_⟩
    · exact (congrArg Pool.live e).trans rfl
    · exact (congrArg Pool.table e).trans rfl
    · exact (congrArg Pool.len e).trans rfl
    · exact (congrArg Pool.mem e).trans rfl
  · have e := pushIfUnref_of_ne P b h
    exact ⟨congrArg Pool.live e, congrArg Pool.table e, congrArg Pool.len e, congrArg Pool.mem e⟩

/-- Dropping one reference to `b` (`P1`: refcounts as in `P` except one fewer for `b`), then
`pushIfUnref b`, keeps the free list right: `b` joins it exactly when its count reaches 0. -/
theorem wf_release {α : Type} (N : Nat) (P P1 : Pool α) (b : Nat) (hwf : PoolWF N P)
    (hlive : P1.live = P.live) (hfree : P1.free = P.free) (hrefs : RefsOK N P1)
    (hcount : ∀ d, refcount P1 d + ind d (some b) = refcount P d) (hb : b < N) :
    PoolWF N (pushIfUnref P1 b) := by
  obtain ⟨hnd, hfnd, hfr, _⟩ := poolWF_parts N P hwf
  have hb1 : ind b (some b) = 1 := ind_self b
  have hPb : ¬ InL b P.free := by
    intro hin
    have h2 := ((hfr b).1 hin).2
    have h3 := hcount b
    omega
  have hd : ∀ d, ¬ d = b → refcount P1 d = refcount P d := by
    intro d hdb
    have h3 := hcount d
    have h4 : ind d (some b) = 0 := ind_ne d b (fun e => hdb e.symm)
    omega
  have hnd1 : NoDupL P1.live := by rw [hlive]; exact hnd
  by_cases h0 : refcount P1 b = 0
  · have hfnd1 : NoDupL (P1.free ++ [b]) := by
      rw [hfree]
      exact noDupL_append_singleton b P.free hfnd hPb
    have hiff : ∀ d, InL d (P1.free ++ [b]) ↔ (d < N ∧ refcount P1 d = 0) := by
      intro d
      rw [hfree]
      by_cases hdb : d = b
      · rw [hdb]
        constructor
        · intro _
          exact ⟨hb, h0⟩
        · intro _
          exact (inL_append_singleton b b P.free).2 (Or.inr rfl)
      · have e1 := hd d hdb
        constructor
        · intro hin
          cases (inL_append_singleton d b P.free).1 hin with
          | inl h5 =>
            have h6 := (hfr d).1 h5
            have h7 := h6.2
            exact ⟨h6.1, by omega⟩
          | inr h5 => exact absurd h5.symm hdb
        · intro h5
          have h7 := h5.2
          have h6 : InL d P.free := (hfr d).2 ⟨h5.1, by omega⟩
          exact (inL_append_singleton d b P.free).2 (Or.inl h6)
    have hrefs1 : RefsOK N { P1 with free := P1.free ++ [b] } := by
      unfold RefsOK at hrefs ⊢
      exact hrefs
    rw [pushIfUnref_of_zero P1 b h0]
    exact poolWF_intro N { P1 with free := P1.free ++ [b] } hnd1 hfnd1 hiff hrefs1
  · have hfnd1 : NoDupL P1.free := by rw [hfree]; exact hfnd
    have hiff : ∀ d, InL d P1.free ↔ (d < N ∧ refcount P1 d = 0) := by
      intro d
      rw [hfree]
      by_cases hdb : d = b
      · rw [hdb]
        constructor
        · intro hin
          exact absurd hin hPb
        · intro h5
          exact absurd h5.2 h0
      · rw [hd d hdb]
        exact hfr d
    rw [pushIfUnref_of_ne P1 b h0]
    exact poolWF_intro N P1 hnd1 hfnd1 hiff hrefs

/-- The count after `table s := l` (`s` live, listed once). -/
theorem dropRef_count {α : Type} (P : Pool α) (s : Nat) (l : List (Option Nat))
    (hnd : NoDupL P.live) (hs : InL s P.live) (d : Nat) :
    refcount (dropRef P s l) d + countIn d (P.table s) = refcount P d + countIn d l :=
  refsIn_upd P.table d s l P.live hnd hs

/-- `table s := l` keeps references in range if every entry of `l` was one of `s`'s. -/
theorem refsOK_dropRef {α : Type} (N : Nat) (P : Pool α) (s : Nat) (l : List (Option Nat))
    (h : RefsOK N P) (hl : ∀ k c, getSlot l k = some c → ∃ k', getSlot (P.table s) k' = some c) :
    RefsOK N (dropRef P s l) := by
  unfold RefsOK
  intro t ht k c hk
  have ht' : InL t P.live := ht
  by_cases hts : t = s
  · have e1 : upd P.table s l t = l := (congrArg (upd P.table s l) hts).trans (upd_same P.table s l)
    have e2 : getSlot (upd P.table s l t) k = getSlot l k := congrArg (fun x => getSlot x k) e1
    have hk' : getSlot l k = some c := e2.symm.trans hk
    obtain ⟨k', hk''⟩ := hl k c hk'
    have hs : InL s P.live := by rw [← hts]; exact ht'
    exact refsOK_at N P h s k' c hs hk''
  · have e1 : upd P.table s l t = P.table t := upd_ne P.table s l t hts
    have e2 : getSlot (upd P.table s l t) k = getSlot (P.table t) k :=
      congrArg (fun x => getSlot x k) e1
    exact refsOK_at N P h t k c ht' (e2.symm.trans hk)

/-- Releasing a reference of `s` to `b` (its table becomes `l`, with one `b` fewer and nothing
new) keeps the invariant. -/
theorem wf_dropRef_release {α : Type} (N : Nat) (P : Pool α) (s b : Nat) (l : List (Option Nat))
    (hwf : PoolWF N P) (hs : InL s P.live) (hb : b < N)
    (hl : ∀ k c, getSlot l k = some c → ∃ k', getSlot (P.table s) k' = some c)
    (hcnt : ∀ d, countIn d l + ind d (some b) = countIn d (P.table s)) :
    PoolWF N (pushIfUnref (dropRef P s l) b) := by
  obtain ⟨hnd, _, _, hrefs⟩ := poolWF_parts N P hwf
  refine wf_release N P (dropRef P s l) b hwf rfl rfl (refsOK_dropRef N P s l hrefs hl) ?_ hb
  intro d
  have e1 := dropRef_count P s l hnd hs d
  have e2 := hcnt d
  omega

end KVWindow
