"""Stop words: function words that appear on every page and so say nothing about which page it is.

Kept short on purpose. A stop word is a feature every text shares; leaving one in only adds the
same vector to every fingerprint's sums, while dropping a content word loses signal.
"""

from __future__ import annotations

ZH_STOP_WORDS: frozenset[str] = frozenset(
    """
    的 了 和 是 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 它们 她们
    这 那 这个 那个 这些 那些 在 也 有 被 把 让 给 对 从 向 为 以 于
    之 其 等 但 并 而且 因为 所以 如果 虽然 但是 然后 还是 或者 以及 已经
    可以 这样 那样 什么 怎么 为什么 哪 哪里 谁 吗 呢 吧 啊 呀 哦 嗯 么
    得 地 过 来 去 上 下 中 里 又 再 还 很 更 最 将 会 能 要 个 些
    每 各 该 此 即 则 若 因 由 自 至 向 所 者 你 我 他 她 它 您 咱
    自己 不 没 无 非 之一 一些 一种 一样 以上 以下 之后 之前 时候 目前
    通过 进行 其中
    """.split()
)

EN_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves s t don isn aren wasn weren hasn haven hadn doesn didn won wouldn
    shan shouldn can't cannot also may might must shall upon via per
    """.split()
)

STOP_WORDS: frozenset[str] = ZH_STOP_WORDS | EN_STOP_WORDS
