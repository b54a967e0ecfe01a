"""What the app's screen shows, in plain words: the "how to read this screen" note under its title
(:mod:`workbench.ui`), for a class that meets the terms there before any panel explains them."""
from __future__ import annotations

from .palette import GAP_DESCRIPTIONS

HOW_TO_READ = f"""
**One cycle of speculative decoding at a time.** Each *cycle* drafts a tree of cheap guesses after
the *root* (the newest committed token, the black dot). The model, the *verifier*, checks the whole
tree in one forward pass and keeps the longest path it agrees with (the bold line), plus one token
of its own, the *bonus* (the orange hexagram). What is committed is the model's own output (at
temperature 0, exactly plain greedy decoding's); the drafts change only how many tokens each forward
commits.

- **τ (tau)**: tokens committed per verifier forward, accepted drafts plus the bonus. Plain decoding
  has τ = 1.
- **Cycle 0, the prefill**: the forward that reads the prompt. It drafts nothing and gives the first
  token. Step with Prev / Next, the slider or Play; the arrow keys step too (focus not in a
  field), and a presenter's clicker (PageDown / PageUp) once focus is in the bar (press Next once).
- **A node's colour and shape** name the source that proposed it. *Exact-match* sources copy what
  followed the same last tokens before: prompt lookup (this request's text) and the suffix index
  (earlier outputs and this request's text). *Token recycling* branches from the verifier's own top
  guesses after a token, remembered from earlier forwards. The *semantic key* finds past positions
  whose stored hidden state is nearest to the current one, and proposes what followed them. The
  *rejected-branch pool* proposes what the verifier endorsed after drafted tokens it once rejected,
  found by the state too. A grey
  ring: several sources proposed that node (it takes an exact-match source's colour first).
- **Replayed (the recording decides)**: recorded turns of another model: the recording plays the
  verifier, while the drafts, the states and the neighbours are the local model's.
- **Gap strip**: one cell per output token, labelled by a diagnosis against earlier requests'
  outputs: *{GAP_DESCRIPTIONS["lexical_hit"]}* (an exact-match key finds the next token), *gap* (the
  tokens occur earlier but exact match misses them; the semantic key reaches them, or not), and
  *absent* (the token and the next one never occur together in that pool; either alone may). A
  black band: the drafter's own key, asked one token behind, reaches
  it: what it would find asked there. A cycle asks only for the token after its root, so a band on
  a token accepted deeper in a tree, or on the bonus after a path, has no neighbour table of its
  own (the moments' menu and the hover say so). The labels describe the output, not the method's
  drafting.
- **Nearest neighbours**: the stored positions the semantic key found this cycle, most similar
  first, with what each proposed and how much of it was accepted. *Right for N*: how far its
  continuation matched the output; *next p*: the tree stopped that chain where the chance it gave
  the path through the next token, p, fell below the last node the fill took (the footnote gives
  it; a node's hover gives its own). A path's chance multiplies along it, so a deep token's is
  small even where the chain was likely to go on once it had held.
"""
