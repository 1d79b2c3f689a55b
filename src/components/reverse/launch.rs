//! The command that runs the setup on screen (`crate::reverse::launch`, the CLI's `vramcalc
//! launch`): each command or config in a block with a copy button.

use super::CopyButton;
use crate::components::use_ctx;
use crate::reverse::launch::Command;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct LaunchProps {
    /// `reverse::launch::commands` of the setup.
    pub commands: Vec<Command>,
}

#[function_component(Launch)]
pub fn launch(p: &LaunchProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    html! {
        <div class="launch" data-testid="launch">
            <h3>{ m.run_h }</h3>
            if p.commands.is_empty() { <p class="small muted" data-testid="no-command">{ m.no_command }</p> }
            { for p.commands.iter().map(|c| html! {
                <div class="command" data-testid={format!("launch-{}", c.kind)}>
                    <div class="command-head"><code>{ c.kind }</code>{ " " }<CopyButton text={AttrValue::from(c.text.clone())} testid={format!("copy-{}", c.kind)} /></div>
                    <pre class="small" tabindex="0"><code data-testid={format!("launch-{}-text", c.kind)}>{ &c.text }</code></pre>
                </div>
            }) }
        </div>
    }
}
