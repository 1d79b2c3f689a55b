//! The downloads panel in the page: the per-layer table (CSV) and the estimate (JSON, as
//! `vramcalc estimate --json` writes it), computed here with the full core, and each chart as a
//! standalone SVG copied from the page. This module draws the panel into the app's host element
//! and answers its buttons, so none of it is in the app's first-load bundle.

use crate::panel::{document, draw, element, listen, target_with};
use std::cell::RefCell;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

thread_local! {
    /// The request of the panel shown: `{"host", "lang", "spec", "config", "dist"?}`.
    static SHOWN: RefCell<String> = const { RefCell::new(String::new()) };
}

/// `(id, selector of the <svg>, English name, Chinese name)` of each chart.
const CHARTS: [(&str, &str, &str, &str); 5] = [
    ("capacity", "svg[data-testid=chart-capacity]", "Capacity", "容量"),
    ("breakdown", "[data-testid=chart-breakdown] svg", "Breakdown of the peak", "峰值构成"),
    ("timeline", "svg[data-testid=chart-timeline]", "Memory over one training step", "一次训练迭代中的显存变化"),
    ("batch", "svg[data-testid=chart-batch]", "Memory vs batch size", "显存与批大小"),
    ("layers", "svg[data-testid=chart-layers]", "Per layer: activations saved for backward", "逐层：为反向保存的激活"),
];

/// Draws the panel for `request_json` into its host (nothing while the page shows no estimate).
pub fn render(request_json: &str) -> Result<(), String> {
    let r: serde_json::Value = serde_json::from_str(request_json).map_err(|e| e.to_string())?;
    let Ok(host) = element(r["host"].as_str().unwrap_or_default()) else { return Ok(()) };
    SHOWN.with(|s| *s.borrow_mut() = request_json.to_string());
    let zh = r["lang"] == "zh";
    let tr = |en: &'static str, cn: &'static str| if zh { cn } else { en };
    let charts: String = CHARTS
        .iter()
        .map(|(id, _, en, cn)| format!(r#"<button type="button" data-act="svg-{id}" data-testid="export-svg-{id}">{}</button>"#, tr(en, cn)))
        .collect();
    let html = format!(
        r#"<p class="buttons"><button type="button" data-act="csv" data-testid="export-csv">⤓ {}</button><button type="button" data-act="json" data-testid="export-json">⤓ {}</button></p><p class="buttons"><span class="small muted">{}</span>{charts}</p>"#,
        tr("Per-layer table (CSV)", "逐层表格（CSV）"),
        tr("Estimate (JSON)", "估算结果（JSON）"),
        tr("Charts (SVG):", "图表（SVG）："),
    );
    draw(&host, &html);
    listen(&host, "click", on_click);
    Ok(())
}

fn on_click(e: web_sys::Event) {
    let Some((_, act)) = target_with(&e, "data-act") else { return };
    let request = SHOWN.with(|s| s.borrow().clone());
    let Ok(mut r) = serde_json::from_str::<serde_json::Value>(&request) else { return };
    let stem = crate::export::file_stem(r["spec"]["name"].as_str().unwrap_or("custom model"));
    let file = match act.as_str() {
        "csv" | "json" => {
            r["format"] = act.as_str().into();
            let name = if act == "csv" { format!("{stem}-layers.csv") } else { format!("{stem}-estimate.json") };
            let mime = if act == "csv" { "text/csv;charset=utf-8" } else { "application/json" };
            crate::export::export_file(&r.to_string()).map(|text| (name, mime, text))
        }
        svg => {
            let id = svg.trim_start_matches("svg-");
            let selector = CHARTS.iter().find(|c| c.0 == id).map_or("", |c| c.1);
            standalone_svg(selector).map(|text| (format!("{stem}-{id}.svg"), "image/svg+xml", text)).ok_or_else(|| "the chart is not on the page".into())
        }
    };
    match file {
        Ok((name, mime, text)) => download(&name, mime, &text),
        // The model has an error: say so.
        Err(e) => drop(web_sys::window().map(|w| w.alert_with_message(&e))),
    }
}

/// Downloads `text` as a file named `name` (Blob + object URL + `<a download>`).
pub fn download(name: &str, mime: &str, text: &str) {
    let _ = try_download(name, mime, text);
}

fn try_download(name: &str, mime: &str, text: &str) -> Option<()> {
    let doc = document()?;
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts).ok()?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).ok()?;
    let a: web_sys::HtmlAnchorElement = doc.create_element("a").ok()?.dyn_into().ok()?;
    a.set_href(&url);
    a.set_download(name);
    doc.body()?.append_child(&a).ok()?;
    a.click();
    a.remove();
    // The download has started reading the blob by then.
    let revoke = Closure::once_into_js(move || {
        let _ = web_sys::Url::revoke_object_url(&url);
    });
    let _ = web_sys::window()?.set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 10_000);
    Some(())
}

/// What a chart's look depends on: copied from the computed style into each element's `style`,
/// so the file renders alone (no stylesheet, no CSS variables).
const SVG_PROPS: &[&str] = &[
    "fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity", "opacity", "font-family",
    "font-size", "font-weight",
];

/// The `<svg>` matched by `selector` as a standalone SVG document: `xmlns`, a size from its
/// viewBox, and its computed look inlined.
pub fn standalone_svg(selector: &str) -> Option<String> {
    let w = web_sys::window()?;
    let svg = document()?.query_selector(selector).ok()??;
    let copy: web_sys::Element = svg.clone_node_with_deep(true).ok()?.dyn_into().ok()?;
    let elements = |root: &web_sys::Element| -> Vec<web_sys::Element> {
        let mut v = vec![root.clone()];
        if let Ok(list) = root.query_selector_all("*") {
            v.extend((0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()));
        }
        v
    };
    for (orig, el) in elements(&svg).iter().zip(elements(&copy)) {
        let Ok(Some(cs)) = w.get_computed_style(orig) else { continue };
        let mut style = String::new();
        for p in SVG_PROPS {
            if let Ok(v) = cs.get_property_value(p) {
                if !v.is_empty() {
                    style.push_str(p);
                    style.push(':');
                    style.push_str(&v);
                    style.push(';');
                }
            }
        }
        let _ = el.set_attribute("style", &style);
        let _ = el.remove_attribute("class");
        let _ = el.remove_attribute("data-testid");
    }
    if let Some(vb) = copy.get_attribute("viewBox") {
        let dims: Vec<&str> = vb.split_whitespace().collect();
        if let [_, _, width, height] = dims[..] {
            let _ = copy.set_attribute("width", width);
            let _ = copy.set_attribute("height", height);
        }
    }
    // The panel's background goes first: the text colours are the page theme's, so a dark-mode
    // chart on a transparent background would be light text on whatever the file is shown on.
    if let (Some(fill), Ok(rect)) = (panel_background(&w, &svg), document()?.create_element_ns(Some(SVG_NS), "rect")) {
        for (k, v) in [("width", "100%"), ("height", "100%"), ("fill", fill.as_str())] {
            let _ = rect.set_attribute(k, v);
        }
        let _ = copy.prepend_with_node_1(&rect);
    }
    // XMLSerializer writes the SVG namespace (`xmlns`) on the root and escapes as XML.
    let text = web_sys::XmlSerializer::new().ok()?.serialize_to_string(&copy).ok()?;
    Some(format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{text}\n"))
}

const SVG_NS: &str = "http://www.w3.org/2000/svg";

/// The first non-transparent `background-color` from `el` up.
fn panel_background(w: &web_sys::Window, el: &web_sys::Element) -> Option<String> {
    let mut at = Some(el.clone());
    while let Some(e) = at {
        let bg = w.get_computed_style(&e).ok()??.get_property_value("background-color").ok()?;
        if !bg.is_empty() && bg != "transparent" && bg != "rgba(0, 0, 0, 0)" {
            return Some(bg);
        }
        at = e.parent_element();
    }
    None
}

