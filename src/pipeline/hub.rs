//! A diffusers pipeline from the Hugging Face hub by id, in the browser, as single models are
//! imported (`crate::import::hub`: the same request rules, token and timeout): fetch
//! `https://huggingface.co/<id>/resolve/<revision>/model_index.json`, then each model component's
//! `<folder>/config.json` (`PipelineSpec::model_components`), and check that the core reads them.
//! Errors say which file and what to do (a 404 `model_index.json`: not a diffusers repository;
//! 401/403: gated, give a token).

use crate::import::hub::{fetch, token_for};
use crate::state::pipeline::HubPipeline;
use vramcalc_core::diffusion::PipelineSpec;
use vramcalc_core::hub::{check_status, HubError, HubRef};

/// What one file's HTTP status means: a missing `model_index.json` is a repository that is not
/// a diffusers pipeline (or a wrong id); a missing component config names the file.
pub fn file_status(hub: &HubRef, path: &str, status: u16, with_token: bool) -> Result<(), HubError> {
    match check_status(hub, status, with_token) {
        Err(HubError::NotFound(id)) if path == "model_index.json" => Err(HubError::Import {
            id,
            message: "has no model_index.json (HTTP 404): not a diffusers pipeline repository, or the id or revision is wrong".into(),
        }),
        Err(HubError::NotFound(id)) => Err(HubError::Import { id, message: format!("`{path}` is missing (HTTP 404)") }),
        other => other,
    }
}

/// `input` (an id, `id@revision` or a hub URL) → the repository's files, read by the core.
/// `token`: one the user just typed (kept for this tab); empty: the tab's token, if any.
pub async fn load(input: &str, token: &str) -> Result<HubPipeline, HubError> {
    let hub = HubRef::parse(input)?;
    let token = token_for(token);
    let get = |path: String| {
        let (hub, token) = (hub.clone(), token.clone());
        async move {
            let (status, body) = fetch(&hub.file_url(&path), &token).await?;
            file_status(&hub, &path, status, !token.is_empty())?;
            Ok::<String, HubError>(body)
        }
    };
    let id = hub.to_string();
    let import = |message: String| HubError::Import { id: id.clone(), message };
    let index = get("model_index.json".into()).await?;
    let (_, names) = PipelineSpec::model_components(&index).map_err(|e| import(e.to_string()))?;
    let mut configs = Vec::new();
    for (name, _) in names {
        let body = get(format!("{name}/config.json")).await?;
        configs.push((name, body));
    }
    let h = HubPipeline { hub, index, configs };
    h.spec().map_err(import)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;
    use vramcalc_core::hub::HubErrorKind;

    #[test]
    fn each_status_says_which_file_and_what_to_do() {
        let h = HubRef::parse("black-forest-labs/FLUX.1-dev").unwrap();
        assert!(file_status(&h, "model_index.json", 200, false).is_ok());
        let e = file_status(&h, "model_index.json", 404, false).unwrap_err();
        assert!(e.to_string().contains("not a diffusers pipeline"), "{e}");
        let e = file_status(&h, "transformer/config.json", 404, false).unwrap_err();
        assert!(e.to_string().contains("`transformer/config.json` is missing"), "{e}");
        let gated = file_status(&h, "model_index.json", 401, false).unwrap_err();
        assert_eq!(gated.kind(), HubErrorKind::Gated);
        assert!(gated.to_string().contains("gated") && gated.to_string().contains("token"), "{gated}");
        assert!(matches!(file_status(&h, "vae/config.json", 403, true), Err(HubError::TokenRefused { .. })));
    }

    #[test]
    fn an_invalid_id_is_refused_before_any_request() {
        assert_eq!(block_on(load("not an id!", "")).unwrap_err().kind(), HubErrorKind::Invalid);
        assert_eq!(block_on(load("stabilityai/sdxl-turbo", "")).unwrap_err().kind(), HubErrorKind::Network);
    }

    #[test]
    fn a_repositorys_files_read_as_the_preset_they_are() {
        // the files of the built-in SDXL, as the hub serves them
        let (_, repo, index, comps) = vramcalc_core::diffusion::presets::files("sdxl").unwrap();
        let h = HubPipeline { hub: HubRef::parse(repo).unwrap(), index: index.to_string(), configs: comps.iter().map(|c| (c.0.to_string(), c.1.to_string())).collect() };
        let p = h.spec().unwrap();
        assert_eq!(p.name, *repo);
        assert_eq!(p.components, PipelineSpec::preset("sdxl").unwrap().components);
        let missing = HubPipeline { configs: h.configs[1..].to_vec(), ..h.clone() };
        assert!(missing.spec().unwrap_err().contains("config.json` is missing"));
    }
}
