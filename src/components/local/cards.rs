//! The GPUs of a llama.cpp run: one row per card (mixed cards allowed), added and removed; none
//! is CPU only. The list is the settings' `cards` (`local::gpus` makes the devices of it).

use crate::components::use_ctx;
use crate::local::{card, MAX_CARDS};
use crate::state::local::{LocalAction, LocalSettings};
use crate::state::Action;
use vramcalc_core::GPUS;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct CardsProps {
    pub settings: LocalSettings,
}

#[function_component(CardList)]
pub fn card_list(p: &CardsProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.local();
    let cards = &p.settings.cards;
    let put = {
        let d = ctx.dispatch.clone();
        move |s: LocalSettings| d.dispatch(Action::Local(LocalAction::Set(s)))
    };
    let set = {
        let (put, s) = (put.clone(), p.settings.clone());
        move |cards: Vec<String>| put(LocalSettings { cards, ..s.clone() })
    };
    let row = |(i, id): (usize, &String)| {
        let on_change = {
            let (set, cards) = (set.clone(), cards.clone());
            Callback::from(move |e: Event| {
                if let Ok(id) = card(&e.target_unchecked_into::<HtmlSelectElement>().value()) {
                    let mut next = cards.clone();
                    next[i] = id;
                    set(next);
                }
            })
        };
        let on_remove = {
            let (put, s) = (put.clone(), p.settings.clone());
            Callback::from(move |_| put(crate::local::without_card(&s, i)))
        };
        let dom_id = format!("llama-card-{i}");
        html! {
            <li class="card-row" data-testid="card" data-gpu={id.clone()}>
                <label for={dom_id.clone()} class="sr-only">{ format!("{} {i}", t.gpu) }</label>
                <span class="muted small">{ format!("CUDA{i}") }</span>
                <select id={dom_id} data-testid={format!("card-{i}")} onchange={on_change}>
                    { for GPUS.iter().map(|g| html! { <option value={g.id} selected={g.id == id.as_str()}>{ g.name }</option> }) }
                </select>
                <button type="button" data-testid={format!("card-remove-{i}")} onclick={on_remove}>{ t.remove_card }</button>
            </li>
        }
    };
    let on_add = {
        let (set, cards) = (set.clone(), cards.clone());
        Callback::from(move |_| {
            let mut next = cards.clone();
            next.push(cards.last().cloned().unwrap_or_else(|| "rtx-4090".to_string()));
            set(next);
        })
    };
    html! {
        <fieldset class="cards" data-testid="cards" data-count={cards.len().to_string()}>
            <legend>{ t.cards }</legend>
            if cards.is_empty() {
                <p class="muted small" data-testid="cpu-only">{ t.cpu_only }</p>
            }
            <ul class="plain">{ for cards.iter().enumerate().map(row) }</ul>
            <button type="button" data-testid="card-add" onclick={on_add} disabled={cards.len() >= MAX_CARDS}>{ t.add_card }</button>
        </fieldset>
    }
}
