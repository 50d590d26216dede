/// Advantages and returns for trainers, from episode rewards alone.
///
/// GRPO (group-relative policy optimisation) samples G episodes of one prompt and scores each
/// against its group: A_i = (r_i - mean(r)) / (std(r) + eps), with the sample standard deviation
/// (Bessel's correction, as verl's GRPO estimator computes it) and eps = 1e-6; "grpo_mean" leaves
/// out the division (Dr. GRPO's unbiased variant: only the mean is subtracted). A group of one has
/// advantage 0, and so has a group whose rewards are all equal.
///
/// PPO-style trainers take a return per turn instead: the episode's reward arrives after its last
/// turn, so the return of turn t of T is gamma^(T-1-t) * r.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent::rl {

constexpr double kAdvantageEpsilon = 1e-6;

/// "grpo" or "grpo_mean".
Status check_estimator(const std::string& estimator);

/// One advantage per reward, in order. The estimator must be known (check_estimator).
std::vector<double> group_advantages(const std::vector<double>& rewards,
                                     const std::string& estimator);

/// The discounted return of each of turns turns, for a reward given after the last.
std::vector<double> discounted_returns(int turns, double reward, double gamma);

}  // namespace cuda_agent::rl
