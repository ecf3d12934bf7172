//! vLLM's free block queue (`FreeKVCacheBlockQueue`: a doubly linked list of
//! `KVCacheBlock` objects between two sentinel blocks), read and reordered from Rust for
//! `corun.adapters.vllm_place_front`.
//!
//! Walking the list block by block in Python was most of placement's cost in vLLM's
//! scheduler (~0.1 us a block, thousands of blocks a step); from Rust each step is two
//! attribute reads, but still a cache miss or two on a queue that vLLM has shuffled.
//! [`Mirror`] keeps the queue's order as two arrays of block ids, told of every change
//! but pops by the adapter's wrappers of the queue's own methods (it catches up with
//! pops itself: they only shorten the front), so that reading the front costs what
//! reading an array does. Only the attributes vLLM 0.33's queue and blocks have are
//! used: `fake_free_list_head`, `fake_free_list_tail`, `next_free_block`,
//! `prev_free_block`, `block_id`, `ref_cnt`, `num_free_blocks`.
//!
//! The mirror is trusted for the order, never for what is free: before a block is moved
//! it is checked in the queue itself (its reference count and both neighbours' links),
//! since a queue relinked behind the wrappers can look unchanged where the mirror's
//! cheap checks look (count, first, last block).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use numpy::PyArray1;
use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors;

/// No link: a block not in the queue.
const NONE: u32 = u32::MAX;

/// The order of a vLLM free queue as arrays of block ids, kept in step by being told of
/// every change (``corun.adapters`` wraps the queue's methods to do so), so that its
/// front is read without touching a block object. ``VllmQueueMirror(queue, blocks)``
/// reads the queue once (``blocks``: how many blocks the pool has, ids ``0..blocks``).
/// Any id out of range, a block told of twice, or a removal of a block it does not hold
/// marks it ``broken`` (then the adapter builds a new one); it never raises for that.
#[pyclass(module = "corun._corun", name = "VllmQueueMirror")]
pub struct Mirror {
    /// Links by block id; the head sentinel is `blocks`, the tail `blocks + 1`.
    next: Vec<u32>,
    prev: Vec<u32>,
    /// By block id: whether it held a cached prefix (a block hash) when it was put in
    /// the queue (vLLM hashes blocks only while they are held; `evict_blocks` may drop a
    /// free block's hash behind the mirror: then it is thought cached, the safe side).
    cached: Vec<bool>,
    count: usize,
    /// Set when a change could not be applied: the order is no longer vLLM's.
    #[pyo3(get)]
    broken: bool,
    /// Changes told (calls of the wrapped methods), for the replay's cost accounting.
    #[pyo3(get)]
    told: u64,
    /// Set by a wrapper that could not reach the mirror (a change told while the mirror
    /// was in use, which vLLM's queue never does): out of step, seen by `in_step`.
    missed: Arc<AtomicBool>,
    /// Wrapped calls running now: a queue method that calls another (a port's
    /// ``popleft`` through its ``remove``) tells its change once, from the outermost.
    depth: Arc<AtomicUsize>,
}

impl Mirror {
    fn head(&self) -> u32 {
        (self.next.len() - 2) as u32
    }
    fn tail(&self) -> u32 {
        (self.next.len() - 1) as u32
    }
    fn link(&self, v: &[u32], at: u32) -> u32 {
        v.get(at as usize).copied().unwrap_or(NONE)
    }
    fn set(v: &mut [u32], at: u32, to: u32) {
        if let Some(x) = v.get_mut(at as usize) {
            *x = to;
        }
    }
    /// Whether `id` is a block id this mirror holds now.
    fn holds(&self, id: u32) -> bool {
        id < self.head() && self.link(&self.next, id) != NONE
    }
    /// Links block `id` (not held) just before `at`.
    fn insert_before(&mut self, at: u32, id: u32) {
        if id >= self.head() || self.holds(id) {
            self.broken = true;
            return;
        }
        let before = self.link(&self.prev, at);
        Self::set(&mut self.next, before, id);
        Self::set(&mut self.prev, id, before);
        Self::set(&mut self.next, id, at);
        Self::set(&mut self.prev, at, id);
        self.count += 1;
    }
    /// Unlinks block `id` (held).
    fn unlink(&mut self, id: u32) {
        if !self.holds(id) {
            self.broken = true;
            return;
        }
        let (p, n) = (self.link(&self.prev, id), self.link(&self.next, id));
        Self::set(&mut self.next, p, n);
        Self::set(&mut self.prev, n, p);
        Self::set(&mut self.next, id, NONE);
        Self::set(&mut self.prev, id, NONE);
        self.count -= 1;
    }
    /// Records whether `block` (just put in the mirror) holds a cached prefix. vLLM's
    /// blocks always carry `block_hash`; a block without one (a stand-in) holds none.
    fn note_cached(&mut self, block: &Bound<'_, PyAny>) -> PyResult<()> {
        let hashed = match block.getattr(intern!(block.py(), "block_hash")) {
            Ok(hash) => !hash.is_none(),
            Err(e) if e.is_instance_of::<PyAttributeError>(block.py()) => false,
            Err(e) => return Err(e),
        };
        let id = id_of(block)?;
        if let Some(c) = self.cached.get_mut(id as usize) {
            *c = hashed;
        }
        Ok(())
    }
    fn first(&self) -> Option<u32> {
        Some(self.link(&self.next, self.head())).filter(|&b| b < self.head())
    }
    fn last(&self) -> Option<u32> {
        Some(self.link(&self.prev, self.tail())).filter(|&b| b < self.head())
    }
}

/// A block's id as a mirror slot (`NONE` when it is none).
fn id_of(block: &Bound<'_, PyAny>) -> PyResult<u32> {
    let id: i64 = block.getattr(intern!(block.py(), "block_id"))?.extract()?;
    Ok(u32::try_from(id).unwrap_or(NONE))
}

#[pymethods]
impl Mirror {
    #[new]
    fn new(queue: &Bound<'_, PyAny>, blocks: usize) -> PyResult<Self> {
        if blocks >= (NONE - 1) as usize {
            return Err(PyRuntimeError::new_err(format!(
                "corun: {blocks} blocks are too many to mirror"
            )));
        }
        let slots = blocks + 2;
        let (mut next, mut prev) =
            (errors::try_vec(slots, "the mirror")?, errors::try_vec(slots, "the mirror")?);
        next.resize(slots, NONE); // within the capacity just reserved
        prev.resize(slots, NONE);
        let mut cached = errors::try_vec(slots, "the mirror")?;
        cached.resize(slots, false);
        let mut m = Mirror {
            next,
            prev,
            cached,
            count: 0,
            broken: false,
            told: 0,
            missed: Arc::default(),
            depth: Arc::default(),
        };
        m.reread(queue)?;
        Ok(m)
    }

    /// Reads ``queue`` again, block by block (clears ``broken``).
    fn reread(&mut self, queue: &Bound<'_, PyAny>) -> PyResult<()> {
        let slots = self.next.len();
        for v in [&mut self.next, &mut self.prev] {
            v.clear();
            v.resize(slots, NONE);
        }
        (self.count, self.broken) = (0, false);
        self.missed.store(false, Ordering::Relaxed);
        let (head, tail) = (self.head(), self.tail());
        Self::set(&mut self.next, head, tail);
        Self::set(&mut self.prev, tail, head);
        let py = queue.py();
        let next_attr = intern!(py, "next_free_block");
        let mut block = queue.getattr(intern!(py, "fake_free_list_head"))?.getattr(next_attr)?;
        // At most every block: a longer walk is a broken queue (a cycle), not read on.
        for _ in 0..slots {
            let after = block.getattr(next_attr)?;
            if after.is_none() {
                return Ok(()); // the tail sentinel
            }
            self.insert_before(tail, id_of(&block)?);
            self.note_cached(&block)?;
            block = after;
        }
        self.broken = true;
        Ok(())
    }

    /// Marks the mirror out of step (the next check reads the queue again).
    fn set_broken(&mut self) {
        self.broken = true;
    }

    /// Blocks in the mirror.
    #[getter]
    fn count(&self) -> usize {
        self.count
    }

    /// Whether the mirror agrees with ``queue`` where that is cheap to see, once it has
    /// caught up with the pops: not broken, the same number of blocks, the same last
    /// block (the same first block is what catching up leaves).
    fn in_step(&mut self, queue: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = queue.py();
        self.catch_up(queue)?;
        let broken = self.broken || self.missed.load(Ordering::Relaxed);
        if broken
            || queue.getattr(intern!(py, "num_free_blocks"))?.extract::<usize>()? != self.count
        {
            return Ok(false);
        }
        let prev = intern!(py, "prev_free_block");
        let last = queue.getattr(intern!(py, "fake_free_list_tail"))?.getattr(prev)?;
        // The head sentinel's prev is None: the queue is empty.
        let last = if last.getattr(prev)?.is_none() { None } else { Some(id_of(&last)?) };
        Ok(last == self.last())
    }

    /// Applies the pops made since the last change it was told of. ``popleft`` and
    /// ``popleft_n`` (vLLM's most frequent calls: every decode step that fills a block)
    /// are not wrapped: they only take blocks from the front, so between told changes
    /// the queue is the mirror less a prefix, ending just before the queue's first block.
    /// That prefix is dropped here, before each told change and each check.
    fn catch_up(&mut self, queue: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = queue.py();
        let next = intern!(py, "next_free_block");
        let first = queue.getattr(intern!(py, "fake_free_list_head"))?.getattr(next)?;
        // The tail sentinel's next is None: the queue is empty.
        let first = if first.getattr(next)?.is_none() { None } else { Some(id_of(&first)?) };
        if first.is_some_and(|id| !self.holds(id)) {
            self.broken = true;
            return Ok(());
        }
        while let Some(b) = self.first().filter(|&b| Some(b) != first) {
            self.unlink(b);
        }
        Ok(())
    }

    /// The ids of the first ``count`` blocks, front first (an int64 array; shorter if the
    /// queue ends first).
    fn front<'py>(&self, py: Python<'py>, count: usize) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut ids = errors::try_vec::<i64>(count.min(self.count), "the free queue's front")?;
        let mut b = self.link(&self.next, self.head());
        while ids.len() < count && b < self.head() {
            ids.push(i64::from(b));
            b = self.link(&self.next, b);
        }
        Ok(PyArray1::from_vec(py, ids))
    }

    /// ``queue.remove(block)`` took ``block`` out.
    fn removed(&mut self, block: &Bound<'_, PyAny>) -> PyResult<()> {
        self.unlink(id_of(block)?);
        Ok(())
    }

    /// ``queue.append_n(blocks)`` (or ``append``) put ``blocks`` at the tail, in order.
    fn appended(&mut self, blocks: &Bound<'_, PyAny>) -> PyResult<()> {
        let tail = self.tail();
        for b in blocks.try_iter()? {
            let b = b?;
            self.insert_before(tail, id_of(&b)?);
            self.note_cached(&b)?;
        }
        Ok(())
    }

    /// ``queue.prepend_n(blocks)`` put ``blocks`` at the front, in order.
    fn prepended(&mut self, blocks: &Bound<'_, PyAny>) -> PyResult<()> {
        let first = self.link(&self.next, self.head());
        for b in blocks.try_iter()? {
            let b = b?;
            self.insert_before(first, id_of(&b)?);
            self.note_cached(&b)?;
        }
        Ok(())
    }

    /// The ids of the blocks placement may take for a request of ``count`` blocks,
    /// reading at most ``depth`` blocks from the front (an int64 array, front first):
    /// the first ``count`` (``get_new_blocks`` takes them anyway, evicting what they
    /// cache) and, past them, only blocks that hold no cached prefix, so that placement
    /// never evicts a prefix vLLM would have kept.
    fn window<'py>(
        &self,
        py: Python<'py>,
        count: usize,
        depth: usize,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut ids = errors::try_vec::<i64>(depth.min(self.count), "the free queue's window")?;
        let mut b = self.link(&self.next, self.head());
        let mut at = 0;
        while at < depth && b < self.head() {
            if at < count || !self.cached.get(b as usize).copied().unwrap_or(true) {
                ids.push(i64::from(b));
            }
            at += 1;
            b = self.link(&self.next, b);
        }
        Ok(PyArray1::from_vec(py, ids))
    }

    /// The blocks ``ids`` (held, distinct) moved to the front in order (the mirror
    /// alone: what ``corun._vllm_queue.move_front`` did to the queue; an id not held
    /// marks the mirror broken, to be read again).
    fn moved_front(&mut self, ids: Vec<u32>) {
        for &id in &ids {
            self.unlink(id);
        }
        let first = self.link(&self.next, self.head());
        for id in ids {
            self.insert_before(first, id);
        }
    }
}

/// Which change a wrapped queue method makes.
#[derive(Clone, Copy)]
enum Change {
    Remove,
    Append,
    AppendN,
    PrependN,
}

/// One of a vLLM free queue's methods that change it other than by popping its front,
/// wrapped: has the mirror catch up with the pops since, calls the method, then tells
/// the mirror what it changed (nothing when it raised: vLLM's methods check before they
/// change the queue).
/// ``VllmQueueTold(mirror, name, method)``; ``name`` is the method's.
#[pyclass(module = "corun._corun", name = "VllmQueueTold")]
pub struct Told {
    mirror: Py<Mirror>,
    missed: Arc<AtomicBool>,
    depth: Arc<AtomicUsize>,
    method: Py<PyAny>,
    change: Change,
}

#[pymethods]
impl Told {
    // The wrapped method is bound to the queue whose __dict__ holds this wrapper: a
    // cycle, which the garbage collector can break only if it sees these references.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.method)?;
        visit.call(&self.mirror)
    }

    #[new]
    fn new(mirror: Bound<'_, Mirror>, name: &str, method: Py<PyAny>) -> PyResult<Self> {
        let change = match name {
            "remove" => Change::Remove,
            "append" => Change::Append,
            "append_n" => Change::AppendN,
            "prepend_n" => Change::PrependN,
            other => {
                return Err(PyValueError::new_err(format!(
                    "corun: no mirror change for the method {other:?}"
                )));
            }
        };
        let (missed, depth) = {
            let m = mirror.try_borrow()?;
            (m.missed.clone(), m.depth.clone())
        };
        Ok(Told { mirror: mirror.unbind(), missed, depth, method, change })
    }

    /// A copy of the queue (``pickle``, ``copy.deepcopy``) is vLLM's own: this wrapper
    /// reduces to the method it wraps (a bound method reduces to ``getattr(queue,
    /// name)``), so that the copy calls vLLM's method and holds nothing of corun's (its
    /// mirror is not in the queue's ``__dict__``: ``corun.adapters`` keeps it).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.method.bind(py).call_method0(intern!(py, "__reduce__"))
    }

    #[pyo3(signature = (*args))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let method = self.method.bind(py);
        if self.depth.load(Ordering::Relaxed) == 0 {
            // The pops since the last told change, applied before this change is made.
            let queue = method.getattr(intern!(py, "__self__"));
            let caught = match (self.mirror.try_borrow_mut(py), queue) {
                (Ok(mut m), Ok(q)) => m.catch_up(&q).is_ok(),
                _ => false,
            };
            if !caught {
                self.missed.store(true, Ordering::Relaxed);
            }
        }
        self.depth.fetch_add(1, Ordering::Relaxed);
        let out = method.call1(args);
        if self.depth.fetch_sub(1, Ordering::Relaxed) > 1 {
            return out; // inside another wrapped call, which tells the whole change
        }
        let out = out?;
        let Ok(mut m) = self.mirror.try_borrow_mut(py) else {
            self.missed.store(true, Ordering::Relaxed);
            return Ok(out);
        };
        let arg = args.get_item(0);
        // The method has run: nothing here may raise into vLLM.
        let applied = match (self.change, &arg) {
            (Change::Remove, Ok(block)) => m.removed(block),
            (Change::Append, Ok(block)) => id_of(block).map(|id| {
                let tail = m.tail();
                m.insert_before(tail, id);
            }),
            (Change::AppendN, Ok(blocks)) => m.appended(blocks),
            (Change::PrependN, Ok(blocks)) => m.prepended(blocks),
            (_, Err(_)) => Err(PyRuntimeError::new_err("corun: a queue call without its argument")),
        };
        if applied.is_err() {
            m.set_broken(); // told something it cannot read: out of step, not an error here
        }
        m.told += 1;
        Ok(out)
    }
}
