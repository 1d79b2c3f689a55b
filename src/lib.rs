//! vramcalc web app (Yew).
