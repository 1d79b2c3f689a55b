//! CUDA devices through the driver API, loaded at run time (cudarc's dynamic loading).
//! Every entry point checks for `libcuda` first: `CudaContext::new` panics without it.

use anyhow::{bail, Context, Result};
use cudarc::driver::{result, sys, CudaContext};
use serde::Serialize;

pub const NO_DRIVER: &str = "no NVIDIA driver found: libcuda.so.1 could not be loaded";

/// Fails with [`NO_DRIVER`] where the driver library is missing.
pub fn require_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the driver library by its usual names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        bail!(NO_DRIVER)
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
