//! The batch slider: a log scale that snaps to powers of two, 1 … 4096 (batch sizes people try
//! are powers of two, and a linear 1 … 1024 track gave batch 1–64 a few pixels). The number field
//! beside it still takes any value; the thumb then sits at the nearest power of two.

use web_sys::HtmlInputElement;
use yew::prelude::*;

/// The top of the track: 2^12 = 4096.
pub const SLIDER_TOP_LOG2: u32 = 12;

/// The track position of `batch`: the exponent of its nearest power of two, clamped to the track.
pub fn slider_pos(batch: u64) -> u32 {
    if batch <= 1 {
        return 0;
    }
    // floor(log2), then up when batch is nearer the next power (integers: no libm in the bundle)
    let low = 63 - batch.leading_zeros();
    // batch = 2^low + below; the next power is `2^low - below` away (no overflow at 2^63)
    let below = batch - (1 << low);
    let up = below >= (1u64 << low) - below;
    (low + up as u32).min(SLIDER_TOP_LOG2)
}

/// The batch at track position `pos`.
pub fn slider_batch(pos: u32) -> u64 {
    1 << pos.min(SLIDER_TOP_LOG2)
}

/// `<input type=range>` over the exponents; it announces the batch itself (`aria-valuetext`).
pub fn batch_slider(batch: u64, label: &'static str, testid: &'static str, on_change: Callback<u64>) -> Html {
    let oninput = Callback::from(move |e: InputEvent| {
        if let Ok(pos) = e.target_unchecked_into::<HtmlInputElement>().value().parse::<u32>() {
            on_change.emit(slider_batch(pos));
        }
    });
    html! {
        <input type="range" min="0" max={SLIDER_TOP_LOG2.to_string()} step="1" value={slider_pos(batch).to_string()}
            {oninput} aria-label={label} aria-valuetext={batch.to_string()} data-testid={testid} />
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snaps_to_powers_of_two() {
        assert_eq!((slider_batch(0), slider_batch(6), slider_batch(12), slider_batch(20)), (1, 64, 4096, 4096));
        for p in 0..=SLIDER_TOP_LOG2 {
            assert_eq!(slider_pos(slider_batch(p)), p);
        }
        assert_eq!((slider_pos(0), slider_pos(48), slider_pos(90), slider_pos(100_000)), (0, 6, 6, 12));
        assert_eq!((slider_pos(u64::MAX), slider_pos(1 << 63)), (12, 12), "no overflow at the top");
    }
}
