"""`serve --demo`: scores a few pairs through the server's own gRPC port and prints them,
with the G-Eval read and, beside it, the likelihood scorer, which ranks text better with
the embedded judge (README, Likelihood scorer)."""

from geval_client import AsyncRewardClient

ARTICLE = (
    "The city council voted on Tuesday to build a new public library on the site of the old "
    "bus depot. Construction starts in March and is expected to take two years. The council "
    "said the library will hold 200,000 books and include a children's reading room."
)
PAIRS = [
    ("clean summary", ARTICLE,
     "The council approved a new library on the old bus depot site, to be built over two years from March."),
    ("word salad", ARTICLE, "Library depot bus Tuesday the the council books March children room vote two."),
    ("off-topic", ARTICLE, "I enjoy hiking in the mountains on weekends."),
]
LIKELIHOOD = "likelihood-summary"


async def show_demo(target: str) -> None:
    async with AsyncRewardClient(target) as client:
        items = [{"id": name, "prompt": prompt, "completion": text} for name, prompt, text in PAIRS]
        results = await client.score(items, rubrics=["summeval-coherence", "summeval-relevance"])
        likelihood = await client.score(items, rubrics=[LIKELIHOOD])
    print(f"\n{'item':<14} {'reward':>7}  per rubric: E[s] (label mass) distribution")
    for result in results:
        print(f"{result.id:<14} {result.reward:7.3f}")
        for score in result.scores:
            dist = " ".join(f"{label}:{p:.2f}" for label, p in score.distribution.items())
            print(f"    {score.rubric:<20} {score.expected_score:.2f} ({score.label_mass:.2f})  {dist}")
    print(f"\n{'item':<14} {'reward':>7}  {LIKELIHOOD}: geometric-mean token probability (mean log p, tokens)")
    for result in likelihood:
        score = result.scores[0]
        print(f"{result.id:<14} {result.reward:7.3f}  ({score.mean_logprob:.2f}, {score.tokens_read})")
    print(flush=True)
