//! The downloads panel: the per-layer table (CSV) and the estimate (JSON, as `vramcalc estimate
//! --json` writes it: `crate::export`, tested natively), and each chart as a standalone SVG copied
//! from the page.

use super::use_ctx;
use crate::export::{export_file, file_stem};
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::TrainConfig;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use yew::prelude::*;

/// `(id, selector of the <svg>)` of each chart; their names are the charts' titles (`Tr`).
const CHARTS: [(&str, &str); 5] = [
    ("capacity", "svg[data-testid=chart-capacity]"),
    ("breakdown", "[data-testid=chart-breakdown] svg"),
    ("timeline", "svg[data-testid=chart-timeline]"),
    ("batch", "svg[data-testid=chart-batch]"),
    ("layers", "svg[data-testid=chart-layers]"),
];

#[derive(Properties, PartialEq, Clone)]
pub struct DownloadsProps {
    pub spec: super::Shared<ModelSpec>,
    pub config: TrainConfig,
    pub dist: DistConfig,
}

#[function_component(Downloads)]
pub fn downloads(p: &DownloadsProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let stem = file_stem(&p.spec.display_name());
    let file = |format: &'static str| {
        let (spec, c, d, stem) = (p.spec.clone(), p.config, p.dist, stem.clone());
        Callback::from(move |_: MouseEvent| {
            let (name, mime) = if format == "csv" { (format!("{stem}-layers.csv"), "text/csv;charset=utf-8") } else { (format!("{stem}-estimate.json"), "application/json") };
            match export_file(&spec, &c, &d, format) {
                Ok(text) => download(&name, mime, &text),
                // the model has an error: say so
                Err(e) => drop(web_sys::window().map(|w| w.alert_with_message(&e))),
            }
        })
    };
    let chart_name = |id: &str| match id {
        "capacity" => t.capacity,
        "breakdown" => t.breakdown,
        "timeline" => t.timeline,
        "batch" => t.batch_chart,
        _ => t.per_layer,
    };
    html! {
        <>
            <p class="buttons">
                <button type="button" data-testid="export-csv" onclick={file("csv")}>{ "⤓ " }{ t.export_csv }</button>
                <button type="button" data-testid="export-json" onclick={file("json")}>{ "⤓ " }{ t.export_json }</button>
            </p>
            <p class="buttons"><span class="small muted">{ t.export_charts }</span>
                { for CHARTS.iter().map(|(id, selector)| {
                    let name = format!("{stem}-{id}.svg");
                    let onclick = Callback::from(move |_: MouseEvent| match standalone_svg(selector) {
                        Some(text) => download(&name, "image/svg+xml", &text),
                        None => drop(web_sys::window().map(|w| w.alert_with_message("the chart is not on the page"))),
                    });
                    html! { <button type="button" data-testid={format!("export-svg-{id}")} {onclick}>{ chart_name(id) }</button> }
                }) }
            </p>
        </>
    }
}

/// Downloads `text` as a file named `name` (Blob + object URL + `<a download>`).
pub fn download(name: &str, mime: &str, text: &str) {
    let _ = try_download(name, mime, text);
}

fn try_download(name: &str, mime: &str, text: &str) -> Option<()> {
    let doc = web_sys::window()?.document()?;
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
    let svg = web_sys::window()?.document()?.query_selector(selector).ok()??;
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
    if let (Some(fill), Ok(rect)) = (panel_background(&w, &svg), w.document()?.create_element_ns(Some(SVG_NS), "rect")) {
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

