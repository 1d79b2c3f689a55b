//! Title bar: undo/redo and display preferences (units, language, theme).

use super::Ctx;
use crate::i18n::Lang;
use crate::state::{Action, Theme};
use vramcalc_core::ByteUnit;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

/// The title bar (a plain function: no state of its own).
pub fn header(ctx: &Ctx, can_undo: bool, can_redo: bool, theme: Theme) -> Html {
    let t = ctx.tr();
    let d = ctx.dispatch.clone();
    let undo = { let d = d.clone(); Callback::from(move |_| d.dispatch(Action::Undo)) };
    let redo = { let d = d.clone(); Callback::from(move |_| d.dispatch(Action::Redo)) };
    let select = |f: fn(&str) -> Option<Action>| {
        let d = d.clone();
        Callback::from(move |e: Event| {
            if let Some(a) = f(&e.target_unchecked_into::<HtmlSelectElement>().value()) {
                d.dispatch(a);
            }
        })
    };
    let on_unit = select(|v| Some(Action::SetUnit(if v == "MiB" { ByteUnit::Mib } else { ByteUnit::Mb })));
    let on_lang = select(|v| Lang::parse(v).map(Action::SetLang));
    let on_theme = select(|v| Theme::ALL.into_iter().find(|t| t.name() == v).map(Action::SetTheme));
    let theme_label = |th: Theme| match th {
        Theme::Auto => t.theme_auto,
        Theme::Light => t.theme_light,
        Theme::Dark => t.theme_dark,
    };
    html! {
        <header class="top">
            <div class="brand">
                <h1>{ "vramcalc" }</h1>
                <p class="tagline">{ t.tagline }</p>
            </div>
            <div class="prefs">
                <button onclick={undo} disabled={!can_undo} data-testid="undo" title="Ctrl+Z" aria-label={t.undo}>{ "↶ " }{ t.undo }</button>
                <button onclick={redo} disabled={!can_redo} data-testid="redo" title="Ctrl+Shift+Z" aria-label={t.redo}>{ "↷ " }{ t.redo }</button>
                <label class="inline">
                    <span>{ t.units }</span>
                    <select onchange={on_unit} data-testid="unit-select" aria-label={t.units}>
                        <option value="MB" selected={ctx.unit == ByteUnit::Mb}>{ "MB (10⁶)" }</option>
                        <option value="MiB" selected={ctx.unit == ByteUnit::Mib}>{ "MiB (2²⁰)" }</option>
                    </select>
                </label>
                <label class="inline">
                    <span>{ t.language }</span>
                    <select onchange={on_lang} data-testid="lang-select" aria-label={t.language}>
                        { for Lang::ALL.iter().map(|l| html! {
                            <option value={l.code()} selected={*l == ctx.lang}>{ l.label() }</option>
                        }) }
                    </select>
                </label>
                <label class="inline">
                    <span>{ t.theme }</span>
                    <select onchange={on_theme} data-testid="theme-select" aria-label={t.theme}>
                        { for Theme::ALL.iter().map(|th| html! {
                            <option value={th.name()} selected={*th == theme}>{ theme_label(*th) }</option>
                        }) }
                    </select>
                </label>
            </div>
        </header>
    }
}
