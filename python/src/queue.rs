//! vLLM's free block queue (`FreeKVCacheBlockQueue`: a doubly linked list of
//! `KVCacheBlock` objects between two sentinel blocks), read and reordered from Rust for
//! `corun.adapters.vllm_place_front`.
//!
//! Walking the list block by block in Python was most of placement's cost in vLLM's
//! scheduler (~0.1 us a block, thousands of blocks a step); here each step is two
//! attribute reads. Nothing is cached between calls, so nothing can fall out of step with
//! vLLM's own calls on the queue (touch, evictions, frees of many blocks): every call
//! reads the links as they are. Only the attributes vLLM 0.33's queue and blocks have are
//! used: `fake_free_list_head`, `next_free_block`, `prev_free_block`, `block_id`.

use numpy::PyArray1;
use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors;

/// The ids of the first ``count`` blocks of vLLM's free queue ``queue``, front first (an
/// int64 array; shorter if the queue ends first). For ``corun.adapters``.
#[pyfunction]
#[pyo3(signature = (queue, count))]
pub fn vllm_queue_front<'py>(
    py: Python<'py>,
    queue: &Bound<'py, PyAny>,
    count: usize,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (next, id) = (intern!(py, "next_free_block"), intern!(py, "block_id"));
    let mut ids = errors::try_vec::<i64>(count, "the free queue's front")?;
    let mut block = queue.getattr(intern!(py, "fake_free_list_head"))?.getattr(next)?;
    while ids.len() < count {
        // The tail sentinel's next is None; its id is not a block's.
        let after = block.getattr(next)?;
        if after.is_none() {
            break;
        }
        ids.push(block.getattr(id)?.extract()?);
        block = after;
    }
    Ok(PyArray1::from_vec(py, ids))
}

/// Moves ``blocks`` (blocks of vLLM's free queue ``queue``, distinct) to its front, in
/// the given order: what ``queue.remove`` of each then ``queue.prepend_n(blocks)`` do,
/// in one pass. Every block is checked to be in the queue before any link changes
/// (``RuntimeError`` otherwise, as ``remove`` raises), so a failing call leaves the queue
/// as it was. For ``corun.adapters``.
#[pyfunction]
#[pyo3(signature = (queue, blocks))]
pub fn vllm_queue_move_front<'py>(
    py: Python<'py>,
    queue: &Bound<'py, PyAny>,
    blocks: &Bound<'py, PyList>,
) -> PyResult<()> {
    let (next, prev) = (intern!(py, "next_free_block"), intern!(py, "prev_free_block"));
    for b in blocks.iter() {
        if b.getattr(prev)?.is_none() || b.getattr(next)?.is_none() {
            return Err(PyRuntimeError::new_err(format!(
                "corun: block {} is not in the free queue",
                b.getattr(intern!(py, "block_id"))?
            )));
        }
    }
    for b in blocks.iter() {
        let (p, n) = (b.getattr(prev)?, b.getattr(next)?);
        p.setattr(next, &n)?;
        n.setattr(prev, &p)?;
    }
    let head = queue.getattr(intern!(py, "fake_free_list_head"))?;
    let first = head.getattr(next)?;
    let mut last = head;
    for b in blocks.iter() {
        b.setattr(prev, &last)?;
        last.setattr(next, &b)?;
        last = b;
    }
    last.setattr(next, &first)?;
    first.setattr(prev, &last)?;
    Ok(())
}
