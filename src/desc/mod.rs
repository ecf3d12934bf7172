//! Transfer descriptors: from runs to the `(src_addr, dst_addr, len)` lists that RDMA
//! agents and DMA engines post, for many layer buffers at once, without allocating.
//!
//! A [`Plan`] finds the runs of one `src`/`dst` pair once. A [`Layout`] lists the layer
//! buffers (a [`Layer`] per K or V buffer of each model layer: bases, page size,
//! strides), the [`Order`] and an optional byte cap. The plan then writes
//! [`Descriptor`]s for every layer into caller buffers, resumably ([`Cursor`]), or
//! gathers source segments under one remote range per work request
//! ([`Plan::gather_into`]). Every address is checked arithmetic: a failure is an
//! [`Error`] naming the layer and position.
//!
//! ```
//! use corun::Grouper;
//! use corun::desc::{Cursor, Descriptor, Layer, Layout, Plan};
//!
//! // Pages 10..13 and 40 of the prefill pool go to pages 0..4 of the decode pool.
//! let src = [10u32, 11, 12, 40];
//! let dst = [0u32, 1, 2, 3];
//!
//! // 2 model layers x (K, V): 4 layer buffers of 16 KiB pages on each side.
//! let page = 16 * 1024;
//! let (src_pool, dst_pool) = (0x7f00_0000_0000u64, 0x5500_0000_0000u64);
//! let bytes_per_buffer = 1024 * page;
//! let layers: Vec<Layer> = (0..4)
//!     .map(|b| Layer::new(src_pool + b * bytes_per_buffer, dst_pool + b * bytes_per_buffer, page))
//!     .collect();
//!
//! let mut spans = [corun::Span::default(); 64];
//! let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans)?;
//! let layout = Layout::new(&layers);
//!
//! // One batch post: every descriptor for every layer, layer-major.
//! let mut batch = [Descriptor::default(); 256];
//! let written = plan.descriptors_into(&layout, Cursor::default(), &mut batch)?;
//! assert_eq!(written.descriptors, 8); // 2 runs x 4 buffers, instead of 16 page copies
//! assert_eq!(written.next, None);
//! assert_eq!(batch[0], Descriptor { src_addr: src_pool + 10 * page, dst_addr: dst_pool, len: 3 * page });
//! assert_eq!(batch[1].len, page); // page 40 -> page 3
//! # Ok::<(), corun::desc::Error>(())
//! ```

mod addr;
mod error;
mod gather;
mod layout;
mod plan;

pub use error::Error;
pub use gather::{GatherWritten, Sge, WorkRequest};
pub use layout::{Layer, Layout, Order};
pub use plan::{Cursor, Descriptor, Plan, Written};

/// Every descriptor of `src`/`dst` for `layout`, runs found once with `grouper`.
///
/// Errors: [`Error::LengthMismatch`], the layout checks, [`Error::NegativeIndex`],
/// [`Error::Overflow`], [`Error::Alloc`].
#[cfg(feature = "alloc")]
pub fn descriptors<T: crate::index::Index>(
    grouper: &crate::grouper::Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
) -> Result<alloc::vec::Vec<Descriptor>, Error> {
    let spans = grouper.group(src, dst).map_err(Error::grouping)?;
    Plan::over(grouper, src, dst, &spans, src.len()).descriptors(layout)
}
