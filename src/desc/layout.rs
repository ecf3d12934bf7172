//! Where each layer's pages live, and the limits of one transfer.

use core::num::NonZeroU64;

use super::Error;
use super::addr::{Fault, addr, bytes};
use crate::index::Index;
use crate::step::Steps;

/// One layer buffer on both sides: page `i` of it is `item_len` bytes at `src_base + i *
/// src_stride` on the source and `dst_base + i * dst_stride` on the destination.
///
/// Strides default to `item_len` (pages packed back to back). Pages `i` and `i + step`
/// are adjacent in memory only when `step * stride == item_len` on that side; where they
/// are not, each page gets a transfer of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Layer {
    /// Address of page 0 on the source.
    pub src_base: u64,
    /// Address of page 0 on the destination.
    pub dst_base: u64,
    /// Bytes per page (per item); must not be 0.
    pub item_len: u64,
    /// Bytes from one source page to the next.
    pub src_stride: u64,
    /// Bytes from one destination page to the next.
    pub dst_stride: u64,
}

impl Layer {
    /// A layer of packed pages: both strides are `item_len`.
    pub const fn new(src_base: u64, dst_base: u64, item_len: u64) -> Self {
        Layer { src_base, dst_base, item_len, src_stride: item_len, dst_stride: item_len }
    }

    /// The same layer with the given strides, for pages that are not packed (say, K and
    /// V pages interleaved in one buffer: stride `2 * item_len`).
    #[must_use]
    pub const fn strides(self, src_stride: u64, dst_stride: u64) -> Self {
        Layer { src_stride, dst_stride, ..self }
    }
}

/// The order descriptors of many layers come out in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// All transfers of layer 0, then all of layer 1, and so on.
    #[default]
    LayerMajor,
    /// For each run: its transfers in layer 0, then in layer 1, and so on.
    RunMajor,
}

/// The layers a batch covers, their order, and the byte cap of one transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Layout<'a> {
    layers: &'a [Layer],
    order: Order,
    max_bytes: Option<NonZeroU64>,
}

impl<'a> Layout<'a> {
    /// These layers, layer-major, no byte cap.
    pub const fn new(layers: &'a [Layer]) -> Self {
        Layout { layers, order: Order::LayerMajor, max_bytes: None }
    }

    /// The output order.
    #[must_use]
    pub const fn order(self, order: Order) -> Self {
        Layout { order, ..self }
    }

    /// At most `max_bytes` per transfer (an RDMA message or DMA engine limit): longer runs
    /// are cut into pieces of whole pages, as long as the cap allows, the last shorter.
    #[must_use]
    pub const fn max_bytes(self, max_bytes: NonZeroU64) -> Self {
        Layout { max_bytes: Some(max_bytes), ..self }
    }

    /// The layers.
    pub const fn layers(&self) -> &'a [Layer] {
        self.layers
    }

    /// The output order.
    pub const fn get_order(&self) -> Order {
        self.order
    }

    /// The byte cap, if any.
    pub const fn get_max_bytes(&self) -> Option<NonZeroU64> {
        self.max_bytes
    }

    /// Every layer has a non-zero item length no larger than the cap.
    pub(crate) fn check(&self) -> Result<(), Error> {
        for (layer, l) in self.layers.iter().enumerate() {
            if l.item_len == 0 {
                return Err(Error::ZeroItemLen { layer });
            }
            if self.max_bytes.is_some_and(|m| m.get() < l.item_len) {
                return Err(Error::CapBelowItem { layer });
            }
        }
        Ok(())
    }

    /// Layer `layer` as the writers use it (call after [`check`](Self::check)).
    pub(crate) fn geo(&self, layer: usize, steps: Steps) -> Option<Geo> {
        let l = *self.layers.get(layer)?;
        let packed = |step: u64, stride: u64| {
            u128::from(step) * u128::from(stride) == u128::from(l.item_len)
        };
        let (src_packed, dst_packed) =
            (packed(steps.src, l.src_stride), packed(steps.dst, l.dst_stride));
        let cap = self.max_bytes.map_or(u64::MAX, NonZeroU64::get);
        let whole = cap / l.item_len.max(1);
        let cap_items = usize::try_from(whole).unwrap_or(usize::MAX).max(1);
        let cap_bytes = whole * l.item_len; // at most `cap`
        Some(Geo { layer: l, cap_items, cap_bytes, src_packed, dst_packed })
    }
}

/// One layer, with what the writers derive from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geo {
    pub layer: Layer,
    /// Most pages one transfer may carry under the byte cap (at least 1).
    pub cap_items: usize,
    /// Most bytes one transfer may carry: whole pages within the cap.
    pub cap_bytes: u64,
    /// Consecutive run pages are adjacent in memory on the source side.
    pub src_packed: bool,
    /// The same on the destination side.
    pub dst_packed: bool,
}

impl Geo {
    /// Most pages in one descriptor: the cap when both sides are packed, else 1.
    pub fn per_descriptor(&self) -> usize {
        if self.src_packed && self.dst_packed { self.cap_items } else { 1 }
    }

    /// Address of page `index` on the source, checked.
    pub fn src_addr<T: Index>(&self, index: T, len: u64) -> Result<u64, Fault> {
        addr(self.layer.src_base, index, self.layer.src_stride, len)
    }

    /// Address of page `index` on the destination, checked.
    pub fn dst_addr<T: Index>(&self, index: T, len: u64) -> Result<u64, Fault> {
        addr(self.layer.dst_base, index, self.layer.dst_stride, len)
    }

    /// Bytes of `items` pages, checked.
    pub fn bytes(&self, items: usize) -> Result<u64, Fault> {
        bytes(items, self.layer.item_len)
    }
}
