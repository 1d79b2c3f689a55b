//! Shortening a step's timeline for reports, shared by the PyTorch and candle profiles.

use super::simulate::TimelinePoint;

/// Keeps at most `max` points, always including the largest of each bucket (the peak survives).
pub(crate) fn downsample(points: Vec<TimelinePoint>, max: usize) -> Vec<TimelinePoint> {
    if points.len() <= max {
        return points;
    }
    let chunk = points.len().div_ceil(max);
    points
        .chunks(chunk)
        .filter_map(|c| c.iter().copied().max_by_key(|p| p.bytes))
        .collect()
}
