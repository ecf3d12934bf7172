//! Placement ([`corun::place`]) against a reference written here from the rule in the
//! module docs, one page and one run at a time, plus the contract any placement must
//! keep whatever its rule: the chosen pages were free, none twice, as many as asked, the
//! rest is the free list without them in its order, and no request comes out with more
//! concurrent runs than the allocator's own choice.

use corun::{Direction, Placement, place, place_scratch_len};

use super::build::TestIndex;

/// The maximal runs of `first` paired with `second`: greedy left to right, both sides
/// stepping by +1, or (with `either`) both by -1, the first pair setting the way.
fn pair_runs<T: TestIndex>(first: &[T], second: &[T], either: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < first.len() {
        let mut j = i + 1;
        let mut way = None;
        while j < first.len() {
            let a = first[j].wide() - first[j - 1].wide();
            let b = second[j].wide() - second[j - 1].wide();
            let fits = a == b
                && match way {
                    None => a == 1 || (either && a == -1),
                    Some(w) => a == w,
                };
            if !fits {
                break;
            }
            way = Some(a);
            j += 1;
        }
        out.push((i, j - i));
        i = j;
    }
    out
}

/// What the reference computes: the chosen pages, the rest, and the counts.
#[derive(Debug, PartialEq, Eq)]
pub struct Placed<T> {
    pub chosen: Vec<T>,
    pub rest: Vec<T>,
    pub bound: usize,
    pub placed: usize,
    pub own: usize,
    pub split: usize,
    pub fallback: bool,
}

/// The rule, written out: runs longest first, each into the extent (a stretch of the list
/// stepping by +1 or -1) with the least room that holds it, from its front; leftovers
/// split over the unused pages in list order; the allocator's own choice unless that is
/// strictly worse.
pub fn reference<T: TestIndex>(first: &[T], free: &[T], either: bool) -> Placed<T> {
    let n = first.len();
    assert!(free.len() >= n);
    let mut runs = pair_runs(first, first, either);
    let bound = runs.len();
    runs.sort_by_key(|&(start, len)| (std::cmp::Reverse(len), start));
    let up = |v: &[T]| v.len() >= 2 && v[1].wide() > v[0].wide();
    let mut chosen: Vec<Option<T>> = vec![None; n];
    let mut used = vec![false; free.len()];
    // Gives the free positions `at` (ascending, one stretch) to first[s..s + at.len()].
    let mut give = |s: usize, at: &[usize], used: &mut Vec<bool>| {
        let pages: Vec<T> = at.iter().map(|&p| free[p]).collect();
        let flip = up(&first[s..s + at.len()]) != up(&pages);
        for (k, &p) in at.iter().enumerate() {
            let q = if flip { at[at.len() - 1 - k] } else { p };
            assert!(chosen[s + k].is_none() && !used[p]);
            chosen[s + k] = Some(free[q]);
        }
        for &p in at {
            used[p] = true;
        }
    };
    // Each run, longest first, into the stretch with the least room that holds it (the
    // earliest on ties), from the front of what is left of it.
    let mut extents: Vec<(usize, usize)> = pair_runs(free, free, true); // (front, room)
    let mut placed_run = vec![false; runs.len()];
    for (k, &(s, l)) in runs.iter().enumerate() {
        let best = (0..extents.len())
            .filter(|&x| extents[x].1 >= l)
            .min_by_key(|&x| (extents[x].1, extents[x].0));
        if let Some(x) = best {
            let (at, room) = extents[x];
            give(s, &(at..at + l).collect::<Vec<_>>(), &mut used);
            extents[x] = (at + l, room - l);
            placed_run[k] = true;
        }
    }
    let mut split = 0;
    for k in 0..runs.len() {
        if placed_run[k] {
            continue;
        }
        split += 1;
        let (s, l) = runs[k];
        let mut done = 0;
        while done < l {
            // The next unused position, and the unused positions right after it whose
            // pages keep stepping the way its first step goes (+1 or -1).
            let p = (0..free.len()).find(|&p| !used[p]).unwrap();
            let mut at = vec![p];
            while done + at.len() < l {
                let q = at[at.len() - 1] + 1;
                if q >= free.len() || used[q] {
                    break;
                }
                let step = free[q].wide() - free[q - 1].wide();
                let first_step =
                    if at.len() >= 2 { free[at[1]].wide() - free[at[0]].wide() } else { step };
                if step.abs() != 1 || step != first_step {
                    break;
                }
                at.push(q);
            }
            give(s + done, &at, &mut used);
            done += at.len();
        }
    }
    let chosen: Vec<T> = chosen.into_iter().map(Option::unwrap).collect();
    let placed = pair_runs(first, &chosen, either).len();
    let own = pair_runs(first, &free[..n], either).len();
    if placed >= own {
        return Placed {
            chosen: free[..n].to_vec(),
            rest: free[n..].to_vec(),
            bound,
            placed: own,
            own,
            split,
            fallback: true,
        };
    }
    let rest = free.iter().zip(&used).filter(|&(_, &u)| !u).map(|(&p, _)| p).collect();
    Placed { chosen, rest, bound, placed, own, split, fallback: false }
}

/// `corun::place` on one input, both directions: the contract, then the reference.
/// `free` must hold distinct pages.
pub fn check_place<T: TestIndex>(first: &[T], free: &[T]) {
    for either in [false, true] {
        let direction = if either { Direction::Either } else { Direction::Ascending };
        let n = first.len();
        if free.len() < n {
            let e =
                place(first, free, direction, &mut vec![T::MIN; n], &mut [], &mut vec![0; 9 * n]);
            assert_eq!(e, Err(corun::Error::NotEnoughFree { pages: n, free: free.len() }));
            continue;
        }
        let mut chosen = vec![T::MIN; n];
        let mut rest = vec![T::MIN; free.len() - n];
        let mut scratch = vec![usize::MAX; place_scratch_len(n, free.len())];
        let got: Placement = place(first, free, direction, &mut chosen, &mut rest, &mut scratch)
            .unwrap_or_else(|e| panic!("place failed: {e}"));

        // The contract.
        let mut all: Vec<T> = chosen.iter().chain(&rest).copied().collect();
        let mut want: Vec<T> = free.to_vec();
        all.sort();
        want.sort();
        assert_eq!(all, want, "chosen and rest must be the free pages, each once");
        let mut it = free.iter();
        assert!(rest.iter().all(|r| it.any(|f| f == r)), "rest must keep the list's order");
        let runs = |second: &[T]| pair_runs(first, second, either).len();
        assert_eq!(got.placed, runs(&chosen), "placed counts the chosen pairing");
        assert_eq!(got.own, runs(&free[..n]), "own counts the allocator's choice");
        assert_eq!(got.bound, pair_runs(first, first, either).len(), "bound: first side's runs");
        assert!(got.bound <= got.placed && got.placed <= got.own, "{got:?}");
        if got.fallback {
            assert_eq!((&chosen[..], &rest[..]), (&free[..n], &free[n..]));
        } else {
            assert!(got.placed < got.own);
        }

        // The rule.
        let r = reference(first, free, either);
        assert_eq!(
            (&chosen, &rest, got.bound, got.placed, got.own, got.split, got.fallback),
            (&r.chosen, &r.rest, r.bound, r.placed, r.own, r.split, r.fallback),
            "against the reference, either={either}, first={first:?}, free={free:?}"
        );
    }
}

/// A free list of distinct pages near `base`: the ids `base..base + span` kept where
/// `keep` says, cut into stretches at `cuts`, some reversed (`flips`), the stretches
/// in an order shuffled by `seed`.
pub fn free_list<T: TestIndex>(
    base: i128,
    span: usize,
    keep: u64,
    cuts: u64,
    flips: u64,
    seed: u64,
) -> Vec<T> {
    let mut stretches: Vec<Vec<T>> = vec![Vec::new()];
    for k in 0..span {
        let id = base + k as i128;
        if id < T::LO || id > T::HI {
            continue;
        }
        if (cuts >> (k % 64)) & 1 == 1 && !stretches.last().unwrap().is_empty() {
            stretches.push(Vec::new());
        }
        if (keep >> (k % 64)) & 1 == 1 {
            stretches.last_mut().unwrap().push(T::wrap(id));
        }
    }
    for (i, s) in stretches.iter_mut().enumerate() {
        if (flips >> (i % 64)) & 1 == 1 {
            s.reverse();
        }
    }
    let mut x = seed | 1;
    for i in (1..stretches.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        stretches.swap(i, (x % (i as u64 + 1)) as usize);
    }
    stretches.concat()
}
