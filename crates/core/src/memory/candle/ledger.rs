//! The memory ledger: live bytes by category, the peak and where it happened.
//!
//! Shadow storages report to it when they are made and dropped ([`Storage`]), so the ledger sees
//! exactly the allocations and frees a candle program makes. Every sum saturates: a step beyond
//! 2^64 bytes peaks at `u64::MAX`, which `Prepared::check_batch` reports as `TooLarge`, as it does
//! for the PyTorch profile.

use crate::memory::timeline::downsample;
use crate::memory::breakdown::{Breakdown, Category};
use crate::memory::device::{round512, round_reserved};
use crate::memory::simulate::{Phase, TimelinePoint};
use std::cell::RefCell;
use std::rc::Rc;

use super::step::CandleStep;

/// Most timeline points a step keeps (the estimate downsamples again for display).
const MAX_TIMELINE: usize = 4000;

/// The ledger as every storage and the tracer share it.
pub(super) type SharedLedger = Rc<RefCell<Ledger>>;

#[derive(Debug)]
pub(super) struct Ledger {
    live: Breakdown,
    live_rounded: u64,
    live_reserved: u64,
    peak: u64,
    /// `live` at the peak.
    peak_breakdown: Breakdown,
    peak_phase: Option<Phase>,
    peak_layer: u32,
    peak_rounded: u64,
    peak_reserved: u64,
    phase_peaks: [u64; 3],
    phase: Phase,
    /// Off while the persistent state is built: the peak is that of the step.
    measuring: bool,
    record: bool,
    timeline: Vec<TimelinePoint>,
}

impl Ledger {
    pub(super) fn shared(record: bool) -> SharedLedger {
        Rc::new(RefCell::new(Ledger::new(record)))
    }

    fn new(record: bool) -> Ledger {
        Ledger {
            live: Breakdown::default(),
            live_rounded: 0,
            live_reserved: 0,
            peak: 0,
            peak_breakdown: Breakdown::default(),
            peak_phase: None,
            peak_layer: u32::MAX,
            peak_rounded: 0,
            peak_reserved: 0,
            phase_peaks: [0; 3],
            phase: Phase::Forward,
            measuring: false,
            record,
            timeline: Vec::new(),
        }
    }

    /// Counts `bytes` of `cat` as live, made while layer row `layer` runs, and samples the peak.
    pub(super) fn alloc(&mut self, bytes: u64, cat: Category, layer: u32) {
        let slot = self.live.slot(cat);
        *slot = slot.saturating_add(bytes);
        self.live_rounded = self.live_rounded.saturating_add(round512(bytes));
        self.live_reserved = self.live_reserved.saturating_add(round_reserved(bytes));
        if !self.measuring {
            return;
        }
        let total = self.live.total();
        let phase = self.phase as usize;
        self.phase_peaks[phase] = self.phase_peaks[phase].max(total);
        if total > self.peak {
            self.peak = total;
            self.peak_breakdown = self.live;
            self.peak_phase = Some(self.phase);
            self.peak_layer = layer;
        }
        self.peak_rounded = self.peak_rounded.max(self.live_rounded);
        self.peak_reserved = self.peak_reserved.max(self.live_reserved);
        if self.record {
            let layer = if self.phase == Phase::Optimizer { u32::MAX } else { layer };
            self.timeline.push(TimelinePoint { phase: self.phase, layer, op: u32::MAX, bytes: total });
        }
    }

    pub(super) fn free(&mut self, bytes: u64, cat: Category) {
        let slot = self.live.slot(cat);
        *slot = slot.saturating_sub(bytes);
        self.live_rounded = self.live_rounded.saturating_sub(round512(bytes));
        self.live_reserved = self.live_reserved.saturating_sub(round_reserved(bytes));
    }

    /// Starts the step: from here allocations count towards the peak.
    pub(super) fn start_measuring(&mut self) {
        self.measuring = true;
        self.peak = 0;
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
    }

    /// The step's figures; leaves an empty ledger behind.
    pub(super) fn take_step(&mut self) -> CandleStep {
        let done = std::mem::replace(self, Ledger::new(false));
        CandleStep {
            peak: done.peak,
            peak_phase: done.peak_phase,
            peak_layer: done.peak_layer,
            breakdown: done.peak_breakdown,
            phase_peaks: done.phase_peaks,
            peak_rounded512: done.peak_rounded,
            peak_reserved: done.peak_reserved,
            timeline: downsample(done.timeline, MAX_TIMELINE),
        }
    }
}

/// A shadow storage: its bytes are live exactly as long as some tensor refers to it.
pub(super) struct Storage {
    bytes: u64,
    cat: Category,
    ledger: SharedLedger,
}

impl Storage {
    pub(super) fn new(ledger: &SharedLedger, bytes: u64, cat: Category, layer: u32) -> Rc<Storage> {
        ledger.borrow_mut().alloc(bytes, cat, layer);
        Rc::new(Storage { bytes, cat, ledger: ledger.clone() })
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.ledger.borrow_mut().free(self.bytes, self.cat);
    }
}
