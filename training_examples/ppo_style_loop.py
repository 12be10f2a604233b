"""A PPO-style loop around the G-Eval reward, without a TRL trainer.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/ppo_style_loop.py --server localhost:50051

TRL 1.16 has no PPO trainer that takes a callable reward, so this loop does the
PPO part itself: sample a group of completions per prompt, score them with the
same GEvalReward the trainers use (one RPC per step), take each completion's
advantage against the mean reward of the other completions of its prompt (no
value model; RLOO's baseline), and make a few clipped-ratio updates over the
batch in minibatches. A completion the judge could not score because of the
completion (empty, too long) gets 0.0 (on_error's default); one it could not score
for another reason (None) gets no advantage, so it does not move the policy.
"""

from __future__ import annotations

import torch
from example_setup import parse_args, summeval_rows
from geval_client import GEvalReward

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}
PROMPTS_PER_STEP = 1
PPO_EPOCHS = 2
MINIBATCH = 2  # sequences per update: activations of 8 x 200 tokens took about 3 GB here
CLIP = 0.2


def leave_one_out_advantages(rewards: list[float | None], group: int) -> torch.Tensor:
    """reward minus the mean of the other scored rewards of its prompt; 0 where
    the completion or all its siblings went unscored."""
    advantages = torch.zeros(len(rewards))
    for start in range(0, len(rewards), group):
        scored = [(i, r) for i, r in enumerate(rewards[start:start + group], start) if r is not None]
        total = sum(r for _, r in scored)
        for i, r in scored:
            if len(scored) > 1:
                advantages[i] = r - (total - r) / (len(scored) - 1)
    return advantages


def completion_logprobs(model, sequences, attention_mask, prompt_length: int) -> torch.Tensor:
    """Log-probability of each completion token under the model, (batch, completion tokens)."""
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    completion_length = sequences.shape[1] - prompt_length
    # Only the logits that predict completion tokens: the vocabulary is large.
    logits = model(
        input_ids=sequences, attention_mask=attention_mask, position_ids=positions,
        logits_to_keep=completion_length + 1,
    ).logits[:, :-1]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return logprobs.gather(-1, sequences[:, prompt_length:, None]).squeeze(-1)


def completion_mask(completion_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1 up to and including the first EOS, 0 after it."""
    is_eos = completion_ids == eos_id
    after_eos = (is_eos.cumsum(-1) - is_eos.long()) > 0
    return (~after_eos).long()


def main() -> None:
    args = parse_args(__doc__)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.policy, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.policy, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    rows = summeval_rows(args.prompts, args.article_words)
    reward = GEvalReward(args.server, RUBRICS, source_column="article", reference_column="reference")
    group = args.generations

    for step in range(args.steps):
        batch = [rows[(step * PROMPTS_PER_STEP + k) % len(rows)] for k in range(PROMPTS_PER_STEP)]
        batch = [row for row in batch for _ in range(group)]
        texts = [tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
                 for row in batch]
        prompt = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        model.eval()
        with torch.no_grad():
            sequences = model.generate(
                **prompt, do_sample=True, max_new_tokens=args.max_completion_length,
                pad_token_id=tokenizer.pad_token_id,
            )
        prompt_length = prompt["input_ids"].shape[1]
        completion_ids = sequences[:, prompt_length:]
        mask = completion_mask(completion_ids, tokenizer.eos_token_id)
        attention_mask = torch.cat([prompt["attention_mask"], mask], dim=1)
        completions = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)

        rewards = reward(
            prompts=[row["prompt"] for row in batch],
            completions=completions,
            completion_ids=[ids[m.bool()].tolist() for ids, m in zip(completion_ids, mask)],
            article=[row["article"] for row in batch],
            reference=[row["reference"] for row in batch],
        )
        advantages = leave_one_out_advantages(rewards, group)[:, None]
        with torch.no_grad():
            old_logprobs = completion_logprobs(model, sequences, attention_mask, prompt_length)

        model.train()
        for _ in range(PPO_EPOCHS):
            for picked in torch.randperm(len(batch)).split(MINIBATCH):
                new_logprobs = completion_logprobs(model, sequences[picked], attention_mask[picked], prompt_length)
                ratio = torch.exp(new_logprobs - old_logprobs[picked])
                clipped = ratio.clamp(1 - CLIP, 1 + CLIP) * advantages[picked]
                surrogate = torch.minimum(ratio * advantages[picked], clipped)
                loss = -(surrogate * mask[picked]).sum() / mask[picked].sum().clamp(min=1)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        scored = [r for r in rewards if r is not None]
        mean_reward = sum(scored) / len(scored) if scored else float("nan")
        diagnostics = {key: round(value, 4) for key, value in reward.last_metrics.items()}
        print(f"step {step + 1}: last minibatch loss {loss.item():.4f} mean reward {mean_reward:.4f} "
              f"scored {len(scored)}/{len(rewards)} {diagnostics}")
    reward.close()


if __name__ == "__main__":
    main()
