//! CUDA devices through the driver API, loaded at run time (cudarc's dynamic loading).
//! Every entry point checks for `libcuda` first: `CudaContext::new` panics without it.

use anyhow::{bail, Context, Result};
use cudarc::driver::{result, sys, CudaContext};
use serde::Serialize;

pub const NO_DRIVER: &str = "no NVIDIA driver found: libcuda.so.1 could not be loaded";

/// `run --device cuda` on a binary built without candle's CUDA backend, on a machine with a driver.
pub const NO_CUDA_BUILD: &str = "this vramcalc-verify was built without CUDA support: rebuild with --features cuda \
     (needs nvcc: a CUDA toolkit, or pip install nvidia-cuda-nvcc; see crates/verify/README.md)";

/// Whether this binary has candle's CUDA backend (`--features cuda`).
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// Why `run --device cuda` cannot go ahead, if it cannot: a missing driver first (whatever the build),
/// then a build without the CUDA backend.
pub fn cuda_unavailable(driver_present: bool, built_with_cuda: bool) -> Option<&'static str> {
    if !driver_present {
        Some(NO_DRIVER)
    } else if !built_with_cuda {
        Some(NO_CUDA_BUILD)
    } else {
        None
    }
}

/// Whether `libcuda.so.1` can be used.
///
/// Without `--features cuda`, cudarc loads the driver at run time (`fallback-dynamic-loading`), so
/// this tries to `dlopen` it. With `--features cuda`, candle-core makes cudarc link the driver
/// (`dynamic-linking`): the binary could not have started without `libcuda.so.1`, so it is present.
pub fn driver_present() -> bool {
    #[cfg(not(feature = "cuda"))]
    {
        // SAFETY: only tries to dlopen the driver library by its usual names.
        unsafe { sys::is_culib_present() }
    }
    #[cfg(feature = "cuda")]
    {
        true
    }
}

/// Fails with [`NO_DRIVER`] where the driver library is missing.
pub fn require_driver() -> Result<()> {
    if driver_present() {
        Ok(())
    } else {
        bail!(NO_DRIVER)
    }
}

/// Fails with the one line of [`cuda_unavailable`] where `run --device cuda` cannot train.
pub fn require_cuda_training() -> Result<()> {
    match cuda_unavailable(driver_present(), BUILT_WITH_CUDA) {
        Some(why) => bail!(why),
        None => Ok(()),
    }
}

#[derive(Debug, Serialize)]
pub struct GpuInfo {
    pub index: usize,
    pub name: String,
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
}

/// Every device with its memory as the driver reports it (our own context included in `used`).
pub fn list() -> Result<Vec<GpuInfo>> {
    require_driver()?;
    let n = CudaContext::device_count().context("cuDeviceGetCount")?;
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        let ctx = CudaContext::new(i).with_context(|| format!("creating a context on device {i}"))?;
        let name = ctx.name().unwrap_or_else(|_| "?".into());
        let (free, total) = ctx.mem_get_info().context("cuMemGetInfo")?;
        out.push(GpuInfo { index: i, name, total_bytes: total as u64, used_bytes: (total - free) as u64, free_bytes: free as u64 });
    }
    Ok(out)
}

#[derive(Debug, Serialize)]
pub struct Probe {
    pub device: String,
    pub index: usize,
    pub total_bytes: u64,
    /// Free memory right after this process created its (primary) context.
    pub free_after_context_bytes: u64,
    /// Extra device memory one more context costs: free before minus free after a second one.
    pub context_bytes: u64,
    /// `cuMemGetAllocationGranularity` (minimum and recommended) for device memory.
    pub granularity_min_bytes: u64,
    pub granularity_recommended_bytes: u64,
    pub source: String,
}

/// Measures the constants of the device-total model on device `index`.
pub fn probe(index: usize) -> Result<Probe> {
    require_driver()?;
    let ctx = CudaContext::new(index).with_context(|| format!("creating a context on device {index}"))?;
    let (free0, total) = ctx.mem_get_info().context("cuMemGetInfo")?;
    // A second, non-primary context on the same device: its cost is the context size.
    let dev = result::device::get(index as i32).context("cuDeviceGet")?;
    let mut raw: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: plain driver calls with valid out-pointers; the context is destroyed below.
    unsafe { sys::cuCtxCreate_v2(&mut raw, 0, dev).result() }.context("cuCtxCreate")?;
    let (free1, _) = result::mem_get_info().context("cuMemGetInfo")?;
    unsafe { sys::cuCtxDestroy_v2(raw).result() }.context("cuCtxDestroy")?;
    ctx.bind_to_thread().context("binding the primary context")?;
    let gran = |option| -> Result<u64> {
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = index as i32;
        let mut g: usize = 0;
        unsafe { sys::cuMemGetAllocationGranularity(&mut g, &prop, option).result() }.context("cuMemGetAllocationGranularity")?;
        Ok(g as u64)
    };
    Ok(Probe {
        device: ctx.name().unwrap_or_else(|_| "?".into()),
        index,
        total_bytes: total as u64,
        free_after_context_bytes: free0 as u64,
        context_bytes: free0.saturating_sub(free1) as u64,
        granularity_min_bytes: gran(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM)?,
        granularity_recommended_bytes: gran(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)?,
        source: format!("vramcalc-verify probe (cudarc driver API), device {index}"),
    })
}

/// `(free, total)` on the device the current thread's context is bound to.
pub fn mem_info() -> Result<(u64, u64)> {
    let (f, t) = result::mem_get_info().context("cuMemGetInfo")?;
    Ok((f as u64, t as u64))
}

/// Device memory as the driver accounts it during one training step on CUDA.
///
/// candle 0.11 has no caching allocator: every tensor storage is a `CudaSlice` from cudarc's
/// `CudaStream::alloc`, which is `cuMemAllocAsync` on the device's current memory pool where the
/// device supports memory pools (`cuMemAlloc` otherwise), and dropping it is `cuMemFreeAsync`
/// (`cuMemFree`). So the stream-ordered pool *is* candle's allocator, and its attributes are the
/// framework's allocation accounting: `USED_MEM_HIGH` is the high-water mark of bytes handed out to
/// tensors, `RESERVED_MEM_HIGH` that of the physical memory the pool mapped for them.
///
/// The pool's release threshold is raised to `u64::MAX` while a step is measured, so that the pool
/// keeps what it mapped instead of returning it at each synchronization: the driver's used memory
/// (`cuMemGetInfo`) sampled after each phase is then the physical high-water mark so far, which is
/// what `nvidia-smi` shows at the peak. The threshold is restored (and the pool trimmed) afterwards.
pub struct StepMeter {
    pool: Option<sys::CUmemoryPool>,
    threshold: u64,
}

/// One sample: the driver's view and, where there is a pool, the pool's.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sample {
    /// `total - free` from `cuMemGetInfo`: the whole device, other processes included.
    pub driver_used_bytes: u64,
    pub pool_used_bytes: u64,
    pub pool_used_high_bytes: u64,
    pub pool_reserved_bytes: u64,
    pub pool_reserved_high_bytes: u64,
}

fn pool_attr(pool: sys::CUmemoryPool, attr: sys::CUmemPool_attribute) -> Result<u64> {
    let mut v: u64 = 0;
    // SAFETY: the pool is the device's current pool; these attributes are `cuuint64_t`.
    unsafe { result::mem_pool::get_attribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
        .with_context(|| format!("cuMemPoolGetAttribute({attr:?})"))?;
    Ok(v)
}

fn set_pool_attr(pool: sys::CUmemoryPool, attr: sys::CUmemPool_attribute, mut v: u64) -> Result<()> {
    // SAFETY: as above; the high-water marks accept only 0 (reset to the current value).
    unsafe { result::mem_pool::set_attribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
        .with_context(|| format!("cuMemPoolSetAttribute({attr:?})"))
}

impl StepMeter {
    /// The meter for device `ordinal`; the caller's thread must have that device's context bound
    /// (candle binds its context on every allocation).
    pub fn new(ordinal: usize) -> Result<StepMeter> {
        use sys::CUmemPool_attribute_enum::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD as THRESHOLD;
        let dev = result::device::get(ordinal as i32).context("cuDeviceGet")?;
        // SAFETY: a valid device handle and attribute.
        let pools = unsafe {
            result::device::get_attribute(dev, sys::CUdevice_attribute_enum::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
        }
        .context("cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)")?;
        if pools == 0 {
            return Ok(StepMeter { pool: None, threshold: 0 });
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device; cuMemAllocAsync allocates from this pool.
        unsafe { sys::cuDeviceGetMemPool(&mut pool, dev).result() }.context("cuDeviceGetMemPool")?;
        let threshold = pool_attr(pool, THRESHOLD)?;
        Ok(StepMeter { pool: Some(pool), threshold })
    }

    pub fn has_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// Starts a measured step: returns the pool's mapped memory to the device, makes the pool
    /// keep what it maps from now on, and resets the high-water marks. Call after a synchronize.
    pub fn begin_step(&self) -> Result<()> {
        use sys::CUmemPool_attribute_enum::*;
        if let Some(pool) = self.pool {
            // SAFETY: a valid pool; nothing is in flight after the caller's synchronize.
            unsafe { result::mem_pool::trim_to(pool, 0) }.context("cuMemPoolTrimTo")?;
            set_pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX)?;
        }
        self.reset_high()
    }

    /// Starts a new peak window at the pool's current figures.
    pub fn reset_high(&self) -> Result<()> {
        use sys::CUmemPool_attribute_enum::*;
        if let Some(pool) = self.pool {
            set_pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0)?;
            set_pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0)?;
        }
        Ok(())
    }

    /// The figures now (call after a synchronize so that every free has happened).
    pub fn sample(&self) -> Result<Sample> {
        use sys::CUmemPool_attribute_enum::*;
        let (free, total) = mem_info()?;
        let mut s = Sample { driver_used_bytes: total.saturating_sub(free), ..Sample::default() };
        if let Some(pool) = self.pool {
            s.pool_used_bytes = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
            s.pool_used_high_bytes = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH)?;
            s.pool_reserved_bytes = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
            s.pool_reserved_high_bytes = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)?;
        }
        Ok(s)
    }

    /// Restores the pool's release threshold and gives back what it kept.
    pub fn end_step(&self) -> Result<()> {
        if let Some(pool) = self.pool {
            set_pool_attr(pool, sys::CUmemPool_attribute_enum::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, self.threshold)?;
            // SAFETY: a valid pool; trimming only releases unused memory.
            unsafe { result::mem_pool::trim_to(pool, 0) }.context("cuMemPoolTrimTo")?;
        }
        Ok(())
    }
}

impl Drop for StepMeter {
    fn drop(&mut self) {
        // a failed step must not leave the device's default pool holding on to everything
        let _ = self.end_step();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_reported_whatever_the_build() {
        assert_eq!(cuda_unavailable(false, false), Some(NO_DRIVER));
        assert_eq!(cuda_unavailable(false, true), Some(NO_DRIVER));
    }

    #[test]
    fn a_driver_without_the_cuda_build_asks_for_a_rebuild() {
        assert_eq!(cuda_unavailable(true, false), Some(NO_CUDA_BUILD));
        assert!(NO_CUDA_BUILD.contains("rebuild with --features cuda"));
        assert!(NO_CUDA_BUILD.contains("nvcc"));
    }

    #[test]
    fn a_driver_and_the_cuda_build_go_ahead() {
        assert_eq!(cuda_unavailable(true, true), None);
    }

    #[test]
    fn the_messages_are_single_lines() {
        for m in [NO_DRIVER, NO_CUDA_BUILD] {
            assert!(!m.contains('\n'), "{m}");
            assert!(!m.contains("  "), "no line-continuation gaps: {m}");
        }
    }

    #[test]
    fn this_build_reports_its_cuda_support() {
        assert_eq!(BUILT_WITH_CUDA, cfg!(feature = "cuda"));
    }
}
