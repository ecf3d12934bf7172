//! The Rust that serves one serving stack's own code, apart from the general functions:
//! [`vllm_queue`], the mirror of vLLM's free block queue that `corun.adapters`'s vLLM
//! placement reads and relinks through, and [`moriio`], the drop-in for vLLM MoRIIO's
//! block merge. Each is written against that stack's tested version (vLLM 0.33); what
//! they compute with corun's core goes through `compute`, like every other call.

pub mod moriio;
pub mod vllm_queue;
