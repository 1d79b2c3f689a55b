//! `AutoencoderKLWan.tiled_decode` (diffusers `models/autoencoders/autoencoder_kl_wan.py`):
//! with `enable_tiling()`, a latent wider or taller than `tile_sample_min_{height,width} / 8`
//! is decoded tile by tile — latent tiles of `tile_sample_min / 8` starting every
//! `tile_sample_stride / 8` (256 and 192 px by default; cut by the latent's border) — each tile
//! from a cleared `feat_cache` (`clear_cache()`), chunk by chunk as `_decode` runs (one latent
//! frame at a time, `post_quant_conv` per chunk), its chunks kept in a list and concatenated.
//! Every decoded tile stays in `rows` until the end: then `blend_v` / `blend_h` (in place), one
//! `torch.cat` per row of the tiles' `[:stride, :stride]` views, the `torch.cat` of the rows, and
//! `torch.clamp` of its crop, with `rows` and the rows' concatenations still alive. A tile size
//! `t` other than the default is `enable_tiling(t, t, 3t/4, 3t/4)` (the default's ratio).
//! The sizes are read from the source; the peaks are checked against measured tiled decodes
//! (`tests/data/diffusion_forward.jsonl`, `wanvae-decode-tiled`).

use super::component::{measure, wan_latent_frames, Forward};
use super::wan_vae::WanVaeConfig;
use crate::error::{Error, Result};
use crate::lower::{Builder, LowerOptions};
use crate::units::{DType, Shape};

/// `AutoencoderKLWan.__init__`: `tile_sample_min_height = 256`, `tile_sample_stride_height = 192`.
pub const TILE_PX: u64 = 256;
pub const STRIDE_PX: u64 = 192;

/// The tiles' latent sizes along one side of `n` latent pixels: `range(0, n, stride)`, each
/// `min(tile, n − start)`.
fn sides(n: u64, tile: u64, stride: u64) -> Vec<u64> {
    (0..n).step_by(stride.max(1) as usize).map(|s| tile.min(n - s)).collect()
}

/// The tiled decode of a `frames`-frame `height × width` video at `batch`, or `None` when the
/// latent fits one tile (`_decode` then runs untiled). `tile_px`: 0 for the VAE's default.
#[allow(clippy::too_many_arguments)]
pub fn tiled_decode(v: &WanVaeConfig, frames: u64, height: u64, width: u64, tile_px: u64, batch: u64, opts: LowerOptions, dt: DType) -> Result<Option<Forward>> {
    let (tile, stride) = match tile_px {
        0 => (TILE_PX, STRIDE_PX),
        t => (t, t * 3 / 4),
    };
    let (lt, ls) = ((tile / 8).max(1), (stride / 8).max(1));
    let (h, w) = ((height / 8).max(1), (width / 8).max(1));
    if h <= lt && w <= lt {
        return Ok(None);
    }
    let (rows, cols) = (sides(h, lt, ls), sides(w, lt, ls));
    let f = wan_latent_frames(frames);
    let t_out = v.out_frames(f);
    let video = |th: u64, tw: u64| Shape::new([v.out_channels, t_out, th * 8, tw * 8]).numel().saturating_mul(dt.size()).saturating_mul(batch);
    let err = |e: String| Error::Config(format!("AutoencoderKLWan: {e}"));
    // per tile size: its last chunk (and `torch.cat` of its chunks) and its first chunk
    let mut sizes: Vec<((u64, u64), (Forward, u64))> = Vec::new();
    let (mut kept, mut peak) = (0u64, 0u64);
    let mut first = None;
    // the tile before's last `decoded` chunk and `tile` (its `post_quant_conv` output) stay
    // bound until this tile's first chunk rebinds them
    let mut leftover = 0u64;
    let up_t = v.out_frames(2) - 1;
    for &r in &rows {
        for &c in &cols {
            let (fw, first_peak) = match sizes.iter().find(|(k, _)| *k == (r, c)) {
                Some((_, x)) => *x,
                None => {
                    let mut b = Builder::new(opts);
                    v.decode_tile(&mut b, frames, r, c, (h, w), batch).map_err(err)?;
                    let fw = measure(&b.g, batch);
                    let first_peak = if f > 1 {
                        let mut b = Builder::new(opts);
                        v.decode_tile_first(&mut b, frames, r, c, (h, w), batch).map_err(err)?;
                        measure(&b.g, batch).peak
                    } else {
                        fw.peak
                    };
                    sizes.push(((r, c), (fw, first_peak)));
                    (fw, first_peak)
                }
            };
            first.get_or_insert(fw);
            // the tiles decoded before it are kept in `rows`
            let last = if f > 1 { fw.peak } else { fw.peak.saturating_add(leftover) };
            peak = peak.max(kept.saturating_add(last)).max(kept.saturating_add(first_peak).saturating_add(leftover));
            kept = kept.saturating_add(video(r, c));
            let chunk_frames = if f > 1 { up_t } else { 1 };
            let per = |ch: u64, t: u64, hh: u64, ww: u64| Shape::new([ch, t, hh, ww]).numel().saturating_mul(dt.size()).saturating_mul(batch);
            leftover = per(v.out_channels, chunk_frames, r * 8, c * 8).saturating_add(per(v.z_dim, 1, r, c));
        }
    }
    let mut out = first.unwrap_or_default();
    // the end: `rows`, the rows' `torch.cat`s (the video's size: the `[:stride]` views of the
    // tiles cover it once), their `torch.cat` and its `clamp`, beside the weights and `z`
    let z = Shape::new([v.z_dim, f, h, w]).numel().saturating_mul(dt.size()).saturating_mul(batch);
    let image = video(h, w);
    let persistent = out.param_bytes.saturating_add(out.buffer_bytes);
    out.peak = peak.max(persistent.saturating_add(z).saturating_add(kept).saturating_add(image.saturating_mul(3)));
    Ok(Some(out))
}
