// Command-line binding of `cadenza bench serve` and `cadenza bench compare` (CLI11).
#pragma once

#include <functional>
#include <optional>

namespace CLI {
class App;
}

namespace cadenza::loadgen {

// Adds the `serve` and `compare` subcommands to `bench` (the `cadenza bench` app). The returned
// function, called after parsing, runs whichever was chosen and returns its exit code, or
// std::nullopt when neither was (plain `cadenza bench -m MODEL`). It must not outlive `bench`.
std::function<std::optional<int>()> add_bench_serve(CLI::App& bench);

}  // namespace cadenza::loadgen
