// The app's worker (src/bin/worker.rs, src/worker/): started by the app on first use as a module
// worker; loads the worker's wasm, whose main answers requests and says "ready".
import init from "./vramcalc-worker.js";
init();
