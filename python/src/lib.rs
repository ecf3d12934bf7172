//! The `corun` Python module (`corun._corun`): a drop-in for SGLang's
//! `group_concurrent_contiguous`, the array-native `runs`, order-free grouping,
//! placement, `transfer_descriptors` for many layers at once, and the stack-specific
//! pieces vLLM's plugin uses. This file only declares the modules and registers what
//! Python sees.
//!
//! The modules, one job each:
//!
//! - [`input`]: Python objects in (index arrays read in place only when numpy's array is
//!   aligned, contiguous and native; per-layer values, integer parameters, `direction=`),
//!   each checked, each error naming its parameter.
//! - [`functions`]: the general functions, each reading its arguments (`input`), doing the
//!   work (`compute`), building its results (`output`).
//! - [`compute`]: the one layer that calls into corun's core, and the one GIL rule: work
//!   on 1,024 items or more runs with the GIL released (`Python::detach`).
//! - [`output`]: Python objects out (lists of groups, arrays, stats, the descriptor forms).
//! - [`errors`]: corun's errors as exceptions naming their parameter, and the fallible
//!   allocations (`MemoryError`, never an abort).
//! - [`ints`]: the shared Python ints and in-place list building (this crate's `unsafe`).
//! - [`stacks`]: code for one stack's own objects: [`stacks::vllm_queue`] (the mirror of
//!   vLLM's free block queue) and [`stacks::moriio`] (vLLM MoRIIO's block merge).

use pyo3::prelude::*;

mod compute;
mod errors;
mod functions;
mod input;
mod ints;
mod output;
mod stacks;

/// Concurrent contiguous runs in paired index arrays (SIMD, Rust), and RDMA transfer
/// descriptors for many layers at once.
#[pymodule]
fn _corun(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ints::configure()?;
    m.add_function(wrap_pyfunction!(functions::group_concurrent_contiguous, m)?)?;
    m.add_function(wrap_pyfunction!(functions::runs, m)?)?;
    m.add_function(wrap_pyfunction!(functions::count_runs, m)?)?;
    m.add_function(wrap_pyfunction!(functions::transfer_descriptors, m)?)?;
    m.add_function(wrap_pyfunction!(functions::sort_by_destination, m)?)?;
    m.add_function(wrap_pyfunction!(functions::place, m)?)?;
    m.add_function(wrap_pyfunction!(stacks::moriio::merge_contiguous_blocks, m)?)?;
    m.add_class::<stacks::vllm_queue::Mirror>()?;
    m.add_class::<stacks::vllm_queue::Told>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
