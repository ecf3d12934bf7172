//! Placement ([`corun::place`]) against a reference written here from the rule in the
//! module docs, one page and one run at a time, over a sorted set of ids, plus the contract any placement must
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

/// The smallest page listed twice in `list`, as its first two positions.
fn duplicate<T: TestIndex>(list: &[T]) -> Option<(usize, usize)> {
    let mut best: Option<(i128, usize, usize)> = None;
    for i in 0..list.len() {
        if let Some(j) = (i + 1..list.len()).find(|&j| list[j] == list[i]) {
            let v = list[i].wide();
            if best.is_none_or(|(b, _, _)| v < b) {
                best = Some((v, i, j));
            }
        }
    }
    best.map(|(_, i, j)| (i, j))
}

/// The rule, written out: a page twice in `first` or `free` is an error; the free pages
/// as sets of consecutive ids (extents); runs longest first, each into the extent with
/// the least room that holds it (lowest ids on ties), taking its highest ids; leftovers
/// filled piece by piece from the extent with the most room (lowest ids on ties), again
/// from the top; the allocator's own choice unless that is strictly worse.
pub fn reference<T: TestIndex>(
    first: &[T],
    free: &[T],
    either: bool,
) -> Result<Placed<T>, corun::Error> {
    let n = first.len();
    assert!(free.len() >= n);
    for (list, pages) in [("first", first), ("free", free)] {
        if let Some((first, second)) = duplicate(pages) {
            return Err(corun::Error::DuplicatePage { list, first, second });
        }
    }
    let mut runs = pair_runs(first, first, either);
    let bound = runs.len();
    runs.sort_by_key(|&(start, len)| (std::cmp::Reverse(len), start));
    let mut ids: Vec<i128> = free.iter().map(|p| p.wide()).collect();
    ids.sort();
    let mut extents: Vec<(i128, usize)> = Vec::new(); // (lowest id, room)
    for id in ids {
        match extents.last_mut() {
            Some((lo, room)) if *lo + *room as i128 == id => *room += 1,
            _ => extents.push((id, 1)),
        }
    }
    let mut chosen: Vec<Option<T>> = vec![None; n];
    // Gives the top `len` ids of extent `x` to first[s..s + len], in that run's direction.
    let mut give = |s: usize, len: usize, x: usize, extents: &mut Vec<(i128, usize)>| {
        let (lo, room) = extents[x];
        assert!(room >= len);
        let low = lo + (room - len) as i128;
        let down = len >= 2 && first[s + 1].wide() < first[s].wide();
        for k in 0..len {
            let id = if down { low + (len - 1 - k) as i128 } else { low + k as i128 };
            assert!(chosen[s + k].is_none());
            chosen[s + k] = Some(T::wrap(id));
        }
        extents[x].1 -= len;
    };
    let mut placed_run = vec![false; runs.len()];
    for (k, &(s, l)) in runs.iter().enumerate() {
        let best = (0..extents.len())
            .filter(|&x| extents[x].1 >= l)
            .min_by_key(|&x| (extents[x].1, extents[x].0));
        if let Some(x) = best {
            give(s, l, x, &mut extents);
            placed_run[k] = true;
        }
    }
    let mut split = 0;
    for (k, &(s, l)) in runs.iter().enumerate() {
        if placed_run[k] {
            continue;
        }
        split += 1;
        let mut done = 0;
        while done < l {
            let most = extents.iter().map(|e| e.1).max().unwrap();
            let x = (0..extents.len())
                .filter(|&x| extents[x].1 == most)
                .min_by_key(|&x| extents[x].0)
                .unwrap();
            let m = most.min(l - done);
            give(s + done, m, x, &mut extents);
            done += m;
        }
    }
    let chosen: Vec<T> = chosen.into_iter().map(Option::unwrap).collect();
    let placed = pair_runs(first, &chosen, either).len();
    let own = pair_runs(first, &free[..n], either).len();
    if placed >= own {
        return Ok(Placed {
            chosen: free[..n].to_vec(),
            rest: free[n..].to_vec(),
            bound,
            placed: own,
            own,
            split,
            fallback: true,
        });
    }
    let rest = free.iter().filter(|p| !chosen.contains(p)).copied().collect();
    Ok(Placed { chosen, rest, bound, placed, own, split, fallback: false })
}

/// `corun::place` on one input, both directions: the contract, then the reference
/// (errors included: a page twice in `first` or `free`).
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
        let got = place(first, free, direction, &mut chosen, &mut rest, &mut scratch);
        let r = match (got, reference(first, free, either)) {
            (Ok(got), Ok(r)) => (got, r),
            (Err(e), Err(want)) => {
                assert_eq!(e, want, "first={first:?}, free={free:?}");
                assert!(chosen.iter().chain(&rest).all(|&v| v == T::MIN), "nothing written");
                continue;
            }
            (got, want) => panic!("place gave {got:?}, the reference {want:?}: {first:?} {free:?}"),
        };
        let (got, r): (Placement, Placed<T>) = r;

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
