//! The reference for order-free grouping (`corun::sort_by_destination`), written from its
//! contract with std's sort and nothing of corun's: the pairs sorted by destination, or,
//! for a repeated destination, the first two input positions of the smallest repeated one.

use corun::{Error, sort_by_destination};

use super::TestIndex;

/// What `sort_by_destination(src, dst, ..)` must give with outputs of the inputs' length.
pub fn reference<T: TestIndex>(src: &[T], dst: &[T]) -> Result<(Vec<T>, Vec<T>), Error> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch { src: src.len(), dst: dst.len() });
    }
    let mut pairs: Vec<(T, T, usize)> =
        src.iter().zip(dst).enumerate().map(|(i, (&s, &d))| (s, d, i)).collect();
    pairs.sort_by_key(|&(_, d, i)| (d, i));
    if let Some(w) = pairs.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(Error::DuplicateDestination { first: w[0].2, second: w[1].2 });
    }
    Ok(pairs.iter().map(|p| (p.0, p.1)).unzip())
}

/// `sort_by_destination` against [`reference`], and on an error the outputs hold the
/// pairs in some order (the contract); outputs one too short or too long are a length
/// error (`src` and `dst` of unequal lengths are checked first). Returns whether the destinations were distinct.
pub fn check_sorted<T: TestIndex>(src: &[T], dst: &[T]) -> bool {
    let n = src.len();
    let (mut s, mut d) = (vec![T::wrap(7); n], vec![T::wrap(7); n]);
    let got = sort_by_destination(src, dst, &mut s, &mut d);
    let want = reference(src, dst);
    match (&got, &want) {
        (Ok(()), Ok((ws, wd))) => {
            assert_eq!((&s, &d), (ws, wd), "sorted pairs of src {src:?} dst {dst:?}");
        }
        _ => assert_eq!(got, want.as_ref().map(|_| ()).map_err(|&e| e), "src {src:?} dst {dst:?}"),
    }
    if got.is_err() && src.len() == dst.len() {
        let mut held: Vec<_> = s.iter().zip(&d).collect();
        let mut given: Vec<_> = src.iter().zip(dst).collect();
        held.sort();
        given.sort();
        assert_eq!(held, given, "after the error the outputs hold the pairs: dst {dst:?}");
    }
    if src.len() == dst.len() {
        let shorter = n.checked_sub(1).map(|m| (m, n));
        for (a, b) in [(n + 1, n), (n, n + 1)].into_iter().chain(shorter) {
            let (mut s, mut d) = (vec![T::wrap(0); a], vec![T::wrap(0); b]);
            let bad = if a != n { a } else { b };
            let got = sort_by_destination(src, dst, &mut s, &mut d);
            assert_eq!(got, Err(Error::LengthMismatch { src: n, dst: bad }));
        }
    }
    want.is_ok()
}
