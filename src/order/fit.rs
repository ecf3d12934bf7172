//! Placement's choice of extent, `O(log x)` a question over `x` extents: the one with the
//! least room that still holds a run (best fit), or the one with the most room (a split
//! run's next piece), ties to the lower ids either way.
//!
//! A sorted table of extents moved one extent down after each run (what placement did
//! first) costs `O(x)` a run: 566 s at a million pages. Here the extents stay in id order
//! and two min-trees over them answer both questions; rooms only shrink.
//!
//! - Best fit asks for the least room `>= len`, which no single aggregate per tree node
//!   answers. But placement asks with `len` never growing (runs longest first), so each
//!   extent is either *fitting* (`room >= least`, the last length asked) or *held*
//!   (`room < least`). `fits` holds the fitting rooms (the least, leftmost, is the best
//!   fit); `held` holds `NONE - room` of the held ones (its least is the held extent with
//!   the most room). When `least` drops, the held extents that now fit are found through
//!   `held` and moved over, each once per shrink that held it: `O((x + runs) log x)` in
//!   all.
//! - For split runs, `least` becomes [`NONE`]: every extent is held, and `held`'s least
//!   is the extent with the most room.
//!
//! Tree nodes are 1-based heap positions over a power of two of *blocks* of [`BLOCK`]
//! extents; a block's value is read from the rooms, not stored, so both trees take at
//! most `x / 2` words (see [`Fit::new`]). Node `i`'s children are `2i` and `2i + 1`;
//! nodes from `top` on are blocks.

/// Extents per block: a block is a scan of this many rooms (one cache line of words).
const BLOCK: usize = 8;

/// No extent: the value of an empty block, or of an extent a tree does not hold.
const NONE: usize = usize::MAX;

/// The extents' rooms (in id order) and the two trees over them.
pub(crate) struct Fit<'a> {
    room: &'a mut [usize],
    fits: &'a mut [usize],
    held: &'a mut [usize],
    /// The last length asked for: extents with at least this room are in `fits`.
    least: usize,
    /// Blocks (a power of two, empty ones past the rooms): the first block's node.
    top: usize,
    /// The rooms changed behind the trees ([`Fit::rooms`]): rebuild before the next
    /// question.
    stale: bool,
}

impl<'a> Fit<'a> {
    /// The trees over `room` (each extent's room, in id order), in `trees`, which must
    /// hold `2 (top - 1)` words, `top <= 2 ceil(x / 8)` for `x` extents: at most `x / 2`,
    /// none for up to 8 extents. `None` when it does not.
    pub(crate) fn new(room: &'a mut [usize], trees: &'a mut [usize]) -> Option<Self> {
        let top = room.len().div_ceil(BLOCK).checked_next_power_of_two()?;
        let (fits, more) = trees.split_at_mut_checked(top - 1)?;
        let held = more.get_mut(..top - 1)?;
        fits.fill(NONE); // nothing fits before the first length is asked
        let mut fit = Fit { room, fits, held, least: NONE, top, stale: false };
        fit.build_held();
        Some(fit)
    }

    /// Extent `k`'s room (0 for no such extent).
    pub(crate) fn room(&self, k: usize) -> usize {
        self.room.get(k).copied().unwrap_or(0)
    }

    /// The extent with the least room `>= len`, the lowest on ties. Lengths must never
    /// grow between calls before [`Fit::most`].
    pub(crate) fn best_fit(&mut self, len: usize) -> Option<usize> {
        if self.stale {
            self.rebuild();
        }
        if len < self.least {
            self.least = len;
            // Held extents that now fit: their blocks read so, their tree paths do not
            // yet. A stored held node at most `NONE - len` leads to one; recomputing the
            // lowest stored node above it moves all of its blocks' extents over.
            let bar = NONE - len;
            while self.top > 1 && self.stored(Tree::Held, 1) <= bar {
                let mut i = 1;
                while 2 * i < self.top {
                    i = if self.stored(Tree::Held, 2 * i) <= bar { 2 * i } else { 2 * i + 1 };
                }
                self.fix_from(i);
            }
        }
        self.leftmost(Tree::Fits)
    }

    /// The extent with the most room left (the lowest on ties), `None` when none has
    /// any. The first call ends best fit: from then on every extent is held.
    pub(crate) fn most(&mut self) -> Option<usize> {
        if self.least != NONE || self.stale {
            self.least = NONE;
            self.stale = false;
            self.build_held();
        }
        self.leftmost(Tree::Held)
    }

    /// Takes `len` pages (at most its room) off extent `k`.
    pub(crate) fn take(&mut self, k: usize, len: usize) {
        if let Some(r) = self.room.get_mut(k) {
            *r = r.saturating_sub(len);
        }
        let block = k / BLOCK;
        self.fix_from(self.top.saturating_add(block) / 2);
    }

    /// Recomputes node `i` and the nodes above it, in both trees (`fits` only while best
    /// fit lasts), up to where a tree's node comes out as it was: its ancestors then are
    /// too.
    fn fix_from(&mut self, mut i: usize) {
        let mut open = [self.least != NONE, true]; // fits, held
        while i >= 1 && open != [false, false] {
            for (tree, open) in [Tree::Fits, Tree::Held].into_iter().zip(open.iter_mut()) {
                if !*open {
                    continue;
                }
                let v = self.value(tree, 2 * i).min(self.value(tree, 2 * i + 1));
                if let Some(slot) = self.nodes(tree).get_mut(i - 1) {
                    *open = *slot != v;
                    *slot = v;
                }
            }
            i /= 2;
        }
    }

    /// The rooms themselves, to change without the trees (a pass over the extents in id
    /// order costs less than a question a page when most extents are asked): the next
    /// question rebuilds the trees first, `O(x)`.
    pub(crate) fn rooms(&mut self) -> &mut [usize] {
        self.stale = true;
        self.room
    }

    /// Both trees from the rooms, bottom up: `O(x)`.
    fn rebuild(&mut self) {
        self.stale = false;
        self.build(&[Tree::Fits, Tree::Held]);
    }

    /// Fills `held` from the rooms, bottom up: `O(x)`.
    fn build_held(&mut self) {
        self.build(&[Tree::Held]);
    }

    /// Fills `trees` from the rooms, bottom up: `O(x)`.
    fn build(&mut self, trees: &[Tree]) {
        for i in (1..self.top).rev() {
            for &tree in trees {
                let v = self.value(tree, 2 * i).min(self.value(tree, 2 * i + 1));
                if let Some(slot) = self.nodes(tree).get_mut(i - 1) {
                    *slot = v;
                }
            }
        }
    }

    /// The lowest extent of the tree's least value, `None` when the tree holds none.
    fn leftmost(&self, tree: Tree) -> Option<usize> {
        let best = self.value(tree, 1);
        if best == NONE {
            return None;
        }
        let mut i = 1;
        while i < self.top {
            i = if self.value(tree, 2 * i) == best { 2 * i } else { 2 * i + 1 };
        }
        let from = (i - self.top).checked_mul(BLOCK)?;
        let rooms = self.room.get(from..)?.iter().take(BLOCK);
        let at = rooms.map(|&r| tree.leaf(r, self.least)).position(|v| v == best)?;
        Some(from + at)
    }

    /// Node `i`'s value: stored below `top`, read from its block's rooms from `top` on.
    fn value(&self, tree: Tree, i: usize) -> usize {
        if i < self.top {
            return self.stored(tree, i);
        }
        let from = (i - self.top).checked_mul(BLOCK).unwrap_or(NONE);
        let rooms = self.room.get(from..).unwrap_or_default().iter().take(BLOCK);
        rooms.map(|&r| tree.leaf(r, self.least)).min().unwrap_or(NONE)
    }

    /// Stored node `i` (`1 <= i < top`).
    fn stored(&self, tree: Tree, i: usize) -> usize {
        let nodes = match tree {
            Tree::Fits => &*self.fits,
            Tree::Held => &*self.held,
        };
        i.checked_sub(1).and_then(|k| nodes.get(k)).copied().unwrap_or(NONE)
    }

    fn nodes(&mut self, tree: Tree) -> &mut [usize] {
        match tree {
            Tree::Fits => self.fits,
            Tree::Held => self.held,
        }
    }
}

/// Which of the two trees.
#[derive(Clone, Copy)]
enum Tree {
    Fits,
    Held,
}

impl Tree {
    /// An extent's value in this tree, given its room and the last length asked.
    fn leaf(self, room: usize, least: usize) -> usize {
        match self {
            Tree::Fits if room >= least => room,
            Tree::Held if room < least => NONE - room,
            _ => NONE,
        }
    }
}
