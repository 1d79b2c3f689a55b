// Writes crates/core/tests/data/ot_patterns.tsv: how llama.cpp reads `-ot PATTERN=BUFFER`
// patterns. llama.cpp compiles each pattern with `std::regex` (default flags: ECMAScript) and
// searches it in every tensor name (`std::regex_search`, `llama_model_loader::create_tensor` /
// `src/llama-model.cpp`); this does the same for the patterns below over GGUF tensor names, so
// `tests/ot_patterns.rs` can check the core's regex engine (regex-lite) against it.
//   g++ -std=c++17 -O1 -o /tmp/ot_patterns tools/llama_cpp/ot_patterns.cpp
//   /tmp/ot_patterns > crates/core/tests/data/ot_patterns.tsv
// Output: a `# names` line (tab-separated), then `pattern<TAB>result` per pattern, result one
// 0/1 per name (does the pattern match somewhere in it) or `error` (std::regex throws).
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

int main() {
    const std::vector<std::string> names = {
        "token_embd.weight", "output.weight", "output_norm.weight", "rope_freqs.weight",
        "blk.0.attn_q.weight", "blk.0.attn_norm.weight", "blk.0.ffn_up_exps.weight",
        "blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight", "blk.1.ffn_gate_up_exps.weight",
        "blk.3.ffn_up_shexp.weight", "blk.5.ffn_up_chexps.weight", "blk.9.ffn_down.weight",
        "blk.10.attn_kv_a_mqa.weight", "blk.12.ffn_up_exps.weight", "blk.19.ffn_down_exps.bias",
        "blk.27.ffn_gate_inp.weight", "blk.60.ffn_down_exps.weight",
    };
    // Patterns from llama.cpp's docs, issues and guides (`exps=CPU`, per-layer ranges, GPU
    // splits), the `--n-cpu-moe` one (`LLM_FFN_EXPS_REGEX`), and edge cases of the syntax.
    const std::vector<std::string> patterns = {
        "exps", "\\.ffn_.*_exps\\.", ".ffn_.*_exps.", "ffn_(up|down)_exps", "ffn_up_exps|ffn_down_exps",
        "blk\\.[0-9]+\\.ffn_(up|down|gate)_exps", "blk\\.([0-9]|1[0-9])\\.ffn_.*_exps\\.weight",
        "blk\\.(1[0-9]|2[0-9])\\.", "blk\\.([3-9]|[1-9][0-9])\\.ffn.*exps", "blk\\.0\\.ffn_(up|down|gate|gate_up)_(ch|)exps",
        "blk\\.\\d+\\.ffn_down", "blk\\.\\d{2}\\.", "blk\\.\\d{1,2}\\.attn", "^blk\\.0\\.", "weight$", "^output",
        "attn_.*", "(shexp|exps)", "blk\\.(?:[0-9]|1[0-1])\\.", "blk\\.[^.]*[02468]\\.ffn", "blk\\..*?\\.ffn",
        "[[:digit:]]+\\.ffn", "[[:alpha:]_]+_exps", "\\bffn_down\\b", "\\w+_exps\\.bias", "\\s", "[a-z]+\\.weight",
        "exps\\.(weight|bias)", "", ".*", "BLK", "blk\\.6[0-9]\\.", "token_embd|output",
        // ECMAScript only: lookahead, back-reference
        "blk\\.(?=1)", "blk\\.(\\d)\\.\\w+\\.\\1",
        // not ECMAScript: inline flags, named groups
        "(?i)EXPS", "(?P<n>exps)",
        // invalid everywhere
        "(", "[exps", "*exps", "blk\\.(1|2",
    };
    std::printf("# names");
    for (auto& n : names) std::printf("\t%s", n.c_str());
    std::printf("\n");
    for (auto& p : patterns) {
        std::string result;
        try {
            std::regex re(p);
            for (auto& n : names) result += std::regex_search(n, re) ? '1' : '0';
        } catch (const std::regex_error&) {
            result = "error";
        }
        std::printf("%s\t%s\n", p.c_str(), result.c_str());
    }
}
