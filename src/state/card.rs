//! The embed card's state (`components::embed`): the link's model and preferences, changed only
//! by the card's controls. Its own reducer rather than [`State`]'s: the card has no undo, no saved
//! work, no layer table and no other workload, and so the card's small bundle (`src/bin/card.rs`)
//! links none of that code (issue 23, load times: `State::reduce` and what only it calls were
//! 65 KB of the card's function bodies).

use super::local::Workload;
use super::{Action, Model, State};
use crate::prefs::Prefs;
use std::rc::Rc;
use yew::Reducible;

#[derive(Debug, Clone, PartialEq)]
pub struct CardState {
    pub model: Model,
    pub prefs: Prefs,
    pub workload: Workload,
}

impl CardState {
    /// The card of the state a link opened.
    pub fn of(s: &State) -> CardState {
        CardState {
            model: s.model.clone(),
            prefs: s.prefs,
            workload: s.workload,
        }
    }
}

impl Reducible for CardState {
    type Action = Action;

    /// The card's controls set the batch, the GPU and the setup (`components::embed`), on the
    /// model as [`State`]'s reducer sets them; any other action changes nothing a card shows
    /// (a chart's "go to layer" has no layer table to open here).
    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            Action::SetBatch(b) => s.model.config.batch = b,
            Action::SetConfig(c) => s.model.config = c,
            Action::SetGpu(g) => s.model.gpu = g,
            _ => return self,
        }
        Rc::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::GpuChoice;

    /// The card's controls change its model as the app's reducer changes the app's.
    #[test]
    fn the_cards_controls_set_the_model_as_the_apps_reducer_does() {
        let app = State::default();
        let card = Rc::new(CardState::of(&app));
        let mut c = app.model.config;
        c.precision = *vramcalc_core::Precision::ALL
            .iter()
            .find(|p| **p != c.precision)
            .unwrap();
        let actions: [&dyn Fn() -> Action; 4] = [
            &|| Action::SetBatch(7),
            &|| Action::SetGpu(GpuChoice::Listed("a100-40gb".into())),
            &|| Action::SetGpu(GpuChoice::Custom(12 << 30)),
            &|| Action::SetConfig(c),
        ];
        for (i, a) in actions.iter().enumerate() {
            let want = Rc::new(app.clone()).reduce(a()).model.clone();
            assert_ne!(want, app.model, "action {i} changes the model");
            assert_eq!(card.clone().reduce(a()).model, want, "action {i}");
        }
        assert!(Rc::ptr_eq(&card.clone().reduce(Action::Undo), &card));
    }
}
