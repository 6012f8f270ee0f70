"""Fingerprints never change: a fixed, seeded set of generated texts against values computed once.

Stores keep fingerprints across releases, so a faster tokenizer, hash loop or reduction must give
every bit of the 64-bit and the wide fingerprint exactly as before. ``EXPECTED`` was computed by
the implementation before the speed work of issue 33 (item 2); each row is ``index config fp
wide`` with the 64-bit fingerprint in hex and the first 8 bytes of BLAKE2b of the wide one (any
change of a wide bit changes it), or ``-`` for a text without features.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from nearduppipe.fingerprint.features import FeatureConfig
from nearduppipe.fingerprint.simhash import EmptyFeaturesError, fingerprints
from nearduppipe.fingerprint.tokenize import _HAN, _NOSPACE, Segmenter, token_counts, tokenize

DATA = Path(__file__).parents[1] / "data"
SENTENCES = [s for s in (DATA / "zh_sentences.txt").read_text("utf-8").splitlines() if s][:58]
WORDS = (
    "东京都は今日、新しい計画を発表しました。 서울시는 오늘 새로운 계획을 발표했다. "
    "أعلنت الحكومة اليوم عن خطة جديدة. วันนี้รัฐบาลประกาศแผนใหม่ Сегодня Правительство объявило "
    "Straße Größe ÄÖÜ İstanbul ǅ ﬁ ﬂ Ω K Å ＦＵＬＬ－ＷＩＤＴＨ １２３ don't rock’n’roll O'Brien "
    "e\u0301 café ①②③ ㈱ ℡ ½ snake_case CamelCase x2y3 3.14 1,000,000 😀👍🏽 👨\u200d👩\u200d👧 🇨🇳 "
    "the of and a to in is library marathon runners city council reported on Tuesday"
).split(" ")
RANGES = [
    (0x4E00, 0x9FD5), (0x3400, 0x4DBF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3),
    (0x0621, 0x064A), (0x0E01, 0x0E3A), (0x0E81, 0x0EDF), (0x1780, 0x17DD), (0x1000, 0x109F),
    (0x0410, 0x044F), (0x61, 0x7A), (0x41, 0x5A), (0x30, 0x39), (0xC0, 0xFF), (0x0300, 0x036F),
    (0x1F300, 0x1F6FF), (0xFF01, 0xFF5E), (0x2000, 0x206F), (0x3000, 0x303F), (0xF900, 0xFAFF),
    (0xFB00, 0xFB06), (0x2460, 0x24FF), (0x1D400, 0x1D7FF), (0x20, 0xFFFD), (0xD800, 0xDFFF),
]  # fmt: skip
SEPS = [" ", " ", "\n", ",", "。", ",", ". ", "'", "’", "_", "-", "\t", ""]
CONFIGS = {
    "default": FeatureConfig(),
    "tfidf": FeatureConfig(weighting="tfidf"),
    "jieba": FeatureConfig(segmenter="jieba"),
    "chars": FeatureConfig(segmenter="chars"),
    "bigrams": FeatureConfig(segmenter="bigrams"),
    "shingle3": FeatureConfig(shingle=3),
    "top_k": FeatureConfig(top_k=20, weighting="tfidf", shingle=2),
    "nostop": FeatureConfig(drop_stop_words=False, sublinear_tf=False, min_token_chars=2),
}


def _run(rng: random.Random, lo: int, hi: int, n: int) -> str:
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def texts() -> list[str]:
    """The seeded texts: Chinese sentences, other scripts, random code points, edge cases."""
    rng = random.Random(33)
    out = ["", " ", "a", "的", "the", "😀", "\u0301", "a\ud800b", "中文", "x" * 300, "的" * 200]
    for _ in range(60):  # Chinese, a sentence to a page
        out.append("".join(rng.choice(SENTENCES) for _ in range(rng.choice([1, 3, 10, 40]))))
    for _ in range(60):  # words of many scripts, with and without spaces, mixed with Chinese
        pool = WORDS + SENTENCES if rng.random() < 0.5 else WORDS
        sep = rng.choice([" ", "", "\n"])
        out.append(sep.join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    for _ in range(140):  # random code points by block, separated by punctuation or nothing
        parts = []
        for _ in range(rng.randint(1, 30)):
            lo, hi = rng.choice(RANGES)
            parts.append(_run(rng, lo, hi, rng.randint(1, 10)))
            parts.append(rng.choice(SEPS))
        out.append("".join(parts))
    for _ in range(30):  # repeated words: large term frequencies
        words = [_run(rng, 0x61, 0x7A, rng.randint(1, 6)) for _ in range(rng.randint(1, 8))]
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 2000))))
    return out


def cases() -> list[tuple[int, str]]:
    """(text index, config name): every text by default, every 10th by every config."""
    n = len(texts())
    return [(i, "default") for i in range(n)] + [
        (i, name) for i in range(0, n, 10) for name in CONFIGS if name != "default"
    ]


def compute(i: int, name: str, text: str) -> str:
    try:
        fp = fingerprints(text, CONFIGS[name])
    except EmptyFeaturesError:
        return f"{i} {name} -"
    assert fp.wide is not None
    wide = hashlib.blake2b(fp.wide.to_bytes(64, "little"), digest_size=8).hexdigest()
    return f"{i} {name} {fp.fp:016x} {wide}"


EXPECTED = """
0 default -
1 default -
2 default -
3 default -
4 default -
5 default -
6 default -
7 default 575a0b1c44d8843f 66249d3e7b4dda04
8 default 8dbce87fe32cdda6 bfeddb20abce5f6f
9 default a5d1b4607dc83554 f86b45f852180e4f
10 default -
11 default 64e47321b3f41ce4 d90054b7ab11bd01
12 default ce9dbdda85ba1ad1 a3d592eeac96a826
13 default 494e6091956edaf5 da017ae8619bf313
14 default cb872dbd90fb18f7 ad024e25124f01bf
15 default 0f8f2f6815419e91 c94c71eb8218f35f
16 default 81ce2759995a9c91 11fc7118bd8ffb04
17 default 4fb5564c81d1deb0 1bd3912b867b662f
18 default 06355ea76c08239b 469331e41aa46087
19 default 50aa4654f54b84b8 0ec22819101d3280
20 default fb4d90558ba48405 4c1e981c10b0f5e6
21 default 884da7ca35fb1b53 5f2e612ba7fe51a3
22 default cb876b2c8ccb9ad1 a9dd3f2d000c6d10
23 default 9d86275c855bbfb8 ef7ad0cc2bb61674
24 default 2ea62cb5e59ae06c 6f0ca40746b9bb7a
25 default 06355ea76c08239b 469331e41aa46087
26 default cc27a18e9e261990 7e3c9c24c8e37ddc
27 default e9de770d95639df0 6c4b82926536c96d
28 default e9cc2f78a1cb9ab0 9d55a126fffdea99
29 default 014e7fc91568dcc0 5956046aed30dee9
30 default ed15a71c71ff3ad1 aab70f06a0d0dc35
31 default a22527ec2ff02877 ea0116d2ee8b5a32
32 default 58960a878c796079 30a69df7b64fc2d3
33 default ccc61d48b44195b0 cb17cd17bcdd0b1f
34 default c4953748b07bdbb0 e83aa9e3c15b0880
35 default 58960a878c796079 30a69df7b64fc2d3
36 default e9c42780b16b9bf9 ab26a7d0c0948746
37 default 09e46388a8cb19f0 69570ab4ae4014f3
38 default e685a14854139350 87634064ffe51667
39 default c9ae251484231bf9 20fbeb96df9aa013
40 default 6cf522aca2729ef0 5522f1d858def66a
41 default 6ce5aaa9a3649ca4 751d48e87f5d5f0a
42 default cae929a220b61d92 11d5ff7cdde6c00c
43 default 21cd274811dbde90 451949886ed6b256
44 default cded2fa5a3e89ca4 2aba98b14567e566
45 default 9b4ed55d35694ad1 24fe23b0a66c5e3e
46 default b0dc7e728bb3a7fd 0cac9423e4a219f7
47 default 4dc62d2a94429c90 6468c627a1ae4df6
48 default 9aa73f0c04b69b31 007d41708629ae7b
49 default 4269290328b41da1 d480b5aff38dd4f2
50 default cbc6335cb1439ff0 c74934ca03e2c55e
51 default ee96c84fa8f3a271 a49e10e971c77071
52 default 48c47798bc69d3b0 1a0aa68c81b33f81
53 default 017d66bd601038ef 1746e38db4a3e0f3
54 default ec6c07dfbe29a328 073a5960f3011040
55 default 19bde62da9913623 eece8a8c2fc81948
56 default f99d27f38feaba7b f048c88b77afd203
57 default 29e4673ca1db7cf8 3fa2790d55715800
58 default e2dc424120579329 115e6c67dbd476f2
59 default 0f5c274a9dd0de91 10a91174e46f4a5a
60 default ee0ecd5871d78321 efe1608b26ea5f05
61 default 99c0522128088e08 812e7e9208ab63d0
62 default 7fbfb309c7113631 2fc23bf69a5d6bd1
63 default c98f070ca0cb9eb1 47802c35eb6ffef3
64 default 092e270ca5fbddf1 62cb238392e8bb98
65 default cfae174c954b9cf0 208bfb2d906829d8
66 default 7e40a00e55052bd0 f9e9b2cd9a5bbfb9
67 default f87c2f5a8bb3a3b9 e444f93caba55cfc
68 default ad86a021f7240ef4 3eae4405e8747948
69 default 65dd2e30a3669ef4 2aaed7976cfde387
70 default 4bbc260ca16a8cb0 5af5daf8d08a6411
71 default 488ca6a88dfa3af5 0f01fe6c647ec971
72 default 439defec15c4eea0 970f1f01c35c9fda
73 default 9f429c97e68c0f30 9cb58ebf6cc7fc18
74 default ebb2c4c65ed48c34 0e911b288fc7e94d
75 default 289a2d33fe9f9a78 12c70682f7423189
76 default cb82bfb3f20bd973 4765c5078d2f0aa9
77 default cd96efe444520db0 340fdf97dce74f68
78 default d9bd2db2a9bb3fb9 18de235f8b7b8a05
79 default 559488382eb40134 7151e3604d093248
80 default 8cb73346ad838f3b a35bf74da99eff72
81 default 4e051825720c029b 9903be75241d5d53
82 default c703ccc65f948c24 66d8f176c01f4a13
83 default c3966f2cc5ca89b0 3ae2e3d71f8d4720
84 default 43968dc5c4468da0 0bf2031e7e994f5b
85 default cf172ff84bda9b73 bd7d05dc55d59f35
86 default 5f96ac04ef888d30 e4fcf88ad56c7d3b
87 default 68ad0bb89bb58e76 bb4f51d561fc051c
88 default ddc0c4da2f9d227c c8e28cf34c134b23
89 default 1e43b1979f3e8138 4eb89848a4762d1b
90 default c9ce67d9a5cf9af8 9814aa347e0df49a
91 default fec6a31feabd9732 9fba0df02275a8d1
92 default c98ce38d81fb1cfb 91560fa88ec280af
93 default 999c472c8efb89f0 adf460ea997d1ca2
94 default 3ec6642cac90d6b0 82a36ef0bb4b2e17
95 default 89c1730490a71370 cf1510349c50c90a
96 default 0d9de1b48ea08118 878f95568d32e375
97 default 89c27112bcc35938 2dd00f56f509f369
98 default 59c48dba6edc3036 3d5aa018f46c4148
99 default ef06af51114f18b8 9164a441ad5e3d21
100 default 4d37e72327d9993e afa542c01e134200
101 default 4dbdc5c60ed20830 6c80c12636a1850a
102 default 404a763b3f4c8c9a 4932b4f5df134ebe
103 default 6dc4a608954f9bf8 051a61784494c6da
104 default 9db680336cc108be 2c722f2f34664d16
105 default 1ec2e9b6a6a5f770 ea66d94929d1f846
106 default a921e3704fda881d d7f454cc42aa96c4
107 default cdc72feaa78e1b70 2e9c38d098b87d1e
108 default d9bc41992bab1d90 f8327e0d41f635b8
109 default c337cde615c218b0 216cb02da8fef895
110 default 49de7b708bd39ff2 6b9a497bf95717e0
111 default 9b9002280c12c931 8a59db2f56fb5c58
112 default 09dd27282ddbd9b0 3d166d3e5299596c
113 default 6394acc6eed60db0 2ba3742fbd2b1dde
114 default 6614670815d219f1 587f30cb45190310
115 default db0ee60c04fb9cb9 e70b1e08d6aebff9
116 default cb962f6c14229bf1 51f61f55d38d1f89
117 default a8c7abac9fa00a74 f73b46381cfcb4da
118 default c9c67d12b48ad330 2290b57117f40cd4
119 default 5925d59b3c80522c f5f61fb7899a48e9
120 default 50aa4654f54b84b8 0ec22819101d3280
121 default 404001268f98815a 322ba9e5d7a41abe
122 default 479eb8eed482cda0 e9d23b6b02cde9a9
123 default cd85e6bda3e259fc de27abfcee096584
124 default 9d5697e464721bf7 e1b6c294233858fd
125 default ce968916b83b9350 b98882eb0de5e3a0
126 default ef85cb6829df8a72 e19285ae6c74e657
127 default 4984c99e3f94727a 98e656e39ea8be1f
128 default e4ae2ff0a1f38ef4 99a0c8dc2ef4e62f
129 default 99b4e5b22fc8823c 6be8f583f21d430d
130 default 91c6571d31e98490 17584d8b23bdf293
131 default 8c455075431b43a2 49d867ea5acf5212
132 default 5a225e19969ca947 351b04c705ea68df
133 default 5e2e0abd00b9020c 379aadd9d6ee6be1
134 default d43124428c2c9972 c0e9091c04412ab8
135 default cf69cc5d3fb97a1f d97ebf93d6361615
136 default c4091856ac6d0217 c6950be135ea4f19
137 default 44a0343aa6135cf3 715d748458d72e1d
138 default 6f36928ea8cea291 b2a36db345d10669
139 default 62145d494b2159f6 10b4cff593f62684
140 default c1b9b26913875894 af5cb5e45ec99b05
141 default e504d2612b384898 5f371f01d74c70f6
142 default 500516394c5e1191 919e08e3bc2389b5
143 default 46a63bb407807dad ed9bb21d3e815c1b
144 default 721573b0627b1204 8798132ff4745c19
145 default 4ad0e0d674286564 e481e17846189d21
146 default 9222248d4f829fc9 a3118d28b815f693
147 default 3320c56627344286 7d228045e9164747
148 default 90466052bcc18ca0 194fb9887bb73602
149 default 6b8ad285cd140216 91dc986c98612b06
150 default 62bc22fc7f105e72 0519db37bdf230f0
151 default 0d1d23d4051b687a 6a5466113a987976
152 default 918fc204390b0b0e 057aa939f2de3d0e
153 default 1649aec08429457c 32bd96734a9bf171
154 default 5da5fe9a856d8548 ae1d7ada208e75e9
155 default 5994c2907a156480 9985704705e1cd19
156 default e70c0b04c14ca221 208bc1825044dc07
157 default 276c59609c10bec1 fe7f910cdc98218b
158 default decc993b0b007263 99cdfe0f65573239
159 default 854dcae4540e46a8 16dde0fcee20c510
160 default cc8ba4bebf80a412 a7eed85dffb8939b
161 default 8678c81a67e0b3b2 420dfc23d3c2c39a
162 default ff16401b79260ea4 921ea947ea0a8b43
163 default d123b234098ea08e 57298b2f1452ac63
164 default 28d040f7a0b07e48 82b4d4442e185770
165 default 8d4d2ac00de25587 12ab533cbcb0bd80
166 default 447521606ae8c33a f0871e9d8ce48136
167 default 5ac1420e6bbd9e82 0bf7b412c13d0b51
168 default cff42ed7ca3e2709 b9a0fb7df6c43229
169 default 3ee2a0ef51bb2de2 896e996abcaabd3a
170 default f427f97c83fe3da3 59bd69d0dcb0f4bf
171 default 108660600520c248 42a5c905094e406f
172 default 40c80474d4ac2c1c 20f04f7967359442
173 default a80040003d02d042 3d40d2f84a11ab68
174 default 3f2a655415a0efaa c60327329f0b8416
175 default c26e5e36f840e9d8 f0fc6f8baa5a05f8
176 default 7a704812c407f0f9 6b4facccaae26f30
177 default 3f90a27dc9f4002e 4f13b486e6c32605
178 default b3f1b83e495cbf36 bf66d0e6b50985d0
179 default 9da4499c168824b3 0b5a59ee8ff0aaeb
180 default c5e00a4441058454 856e644654baf325
181 default bee7805568a65e30 abf9e9211ea8cbce
182 default 13791f5d12ef9aa2 cbc3d2a194fb54f3
183 default b2a37d60ace7de92 765a6f452b0ee64f
184 default b8604d3fed54b62e 6b076151ee0453ec
185 default b2d4303165c4206e c5d3eaa3d952c562
186 default 39f12a924267d463 d744e7ff46f48f2a
187 default e1d8100504a0a072 cc1c5e45a25a4b61
188 default 140c5bcb17c48f2f 30edf247b8a10e6f
189 default e775311134414b69 3ca6407a648bfd5d
190 default 814ad98298117c1a 4c8f64e1e7c35dcd
191 default 337dd8d5f790aedb 09238c6416563ba0
192 default e93ca4454e04d921 c407570edd52cb17
193 default 4c258fdc8f8c7501 72e261ad83769eae
194 default 26bc518b07807066 7a05dfc1c3b54c89
195 default 78ebf610c05ff902 faaf34c728bb1bed
196 default f8d696634595075f 0800b468a885c472
197 default a292f0031c70aefe 4cc444a9ece20cd5
198 default e52c9f251f0d3e39 b49f762f986c75f6
199 default 3f2989444d165d8b fa5ff929aa7c0c51
200 default 28efc8488f2e5354 db082959edc0a602
201 default 3d52dd6e8f183cbc 7c2dec0760e99915
202 default 4fb963ec0fd5b1d7 0dc42bae556494a0
203 default 4c5ef8f0e9f3f69d 518f65e6bb3b51c1
204 default dd9a281adcc18f4e fa1585b917ebf63f
205 default 73a704513e1446d2 1bbe037c1cec1c29
206 default 2e0192ad739146ca 2c7b1aa0329d6bc0
207 default 4c567187baf98495 c7c18c4ae770ce63
208 default 498db2e18527881c 800fd7f9353fe009
209 default 424425e6dbb3a725 f63ee53ae2f02f9f
210 default 9767222050604094 2dcb2b9a33344096
211 default -
212 default cebddb9717265ed9 236b0c0bcfbf1cbc
213 default 958e18c81ff0daaa 43510bfe33adb830
214 default 72958ebf1667d751 c6491c4881a5a0bd
215 default 5da338953fd31fb4 fcf22b87650f2682
216 default 95a64200d39485bf 08f4f8bad0d5610d
217 default 710182310d24f510 a66fc5744283c832
218 default 8482c09e13d300a2 a418420b891305a8
219 default 682029076b918403 8a0d76867ae76c06
220 default ddc31389f56768bc 0c71494ce8127723
221 default e818097832d9e51c 7f91e0ff7295d2b4
222 default 808d801836bb8a84 9653e55d15130374
223 default 151812a33c8bf580 b045243a33f5f9ea
224 default 2a0305300844295d 9529642e6fea3172
225 default 5a0cba2e4d6a4511 84ca080aba693ade
226 default bc7bb56a945021db 5d9e898055061fe6
227 default 43a10105edf17d00 21da258283bad427
228 default 5255679fcb73c000 b01fe0734862d4f4
229 default f08c8543c00e7326 3b8a4f52fbd05310
230 default bf226e02e6dd996f 096acf6b9b639775
231 default 40a8a96c19230110 5774ec67e872981e
232 default 017531122087d445 cdd3ace60532cc18
233 default bbfa47a0a68edc51 9e4c35b01721b1d4
234 default 7dbfd97496a8e569 0d50fa175dc5089f
235 default e1d82eb5e38c8a69 767aa6ec9f736f22
236 default efca02a174dd8aa1 890bfe0ff76a1744
237 default 8ecab80a3010811d 759c102e3cab1db1
238 default 680ce757950cf2b9 ed5f309acd978643
239 default 85a73abc75674933 7577b2360c8d7eac
240 default 632962778fc0605d 0a75b86c8214d863
241 default 2ea62d200e1abc5d 1bf118e1e58d9cfb
242 default 09c26f4f1ff13b76 b9a6bd11624b969d
243 default df9b0fcc2eac3830 3cf974c59b16bda6
244 default 71c1c0235a7d02ad cc0a22f8404b3e6e
245 default 25882528f2c68dba d0eb0b6c7b42cd12
246 default 9d90829fd5f834b2 533da97e54d3c72f
247 default 807ca8b7c1f44d25 929387a7cbe82aab
248 default b164098573d4be75 ddfe6b9d72df1385
249 default 488997346e231a5f 1d26552588e47e5e
250 default 6379cee46af33e8c c8c9c4983f33f225
251 default 83f2715d00f87a11 8f9025e3698ad387
252 default 9934a2fcfe0f84d7 14d523a2dc3bb5dc
253 default 0f1f22c4b5ea03d7 10ca1de820420b04
254 default 2336dc96784961c2 052891b96814e93d
255 default 442aff88c44974d0 fa3e97408a4796d8
256 default 10a6e00915405f80 63095110a355e223
257 default 92474b809f586fa7 f29ff9baa7c6f3b7
258 default 850cf0005fc4acd9 308ff502e6dc591a
259 default bd3fa55ce3e5382b 82fa2e7f0ecb8f7c
260 default b0442154a7f0aca5 26bbf89ab93eab1d
261 default 8f0f576a71ba44cc ebdb2eef8c17aa96
262 default 1210005165e2d591 f417830aaed3ab32
263 default 60448c8806051003 e0931c3b142cdabf
264 default 22c96144b12c0a70 7d49b028cca0c106
265 default e458429485b9a471 3f6a1d706cc1cdd0
266 default cf766947524bdc51 ec502308fabcf6fd
267 default fde6c1098e342210 29281423e4064063
268 default b05c87845528139b 6bea3957c5a767de
269 default 1d480907d4904063 2705375041899727
270 default 487ad46bae5cc94d 5ff4504a3fb98728
271 default cdd1e3857b7a9639 3019cf934dcaf914
272 default 9e55911813a3541f 42af7d2b8e3441b4
273 default 7ec8373f0fbf28c9 e6e8247659d508a2
274 default d651716f666a2730 3f37ae54b1b0eb5c
275 default 21a7458d4ef449a9 703c7861813962f3
276 default 16802db49a71f91e b5b245f78f6516a9
277 default 9f66c283be65c17e 259084a9eb578e41
278 default 79112f0c64162b49 4b412fe73eaf7c5b
279 default 8291ffbd3ef3fee7 bf6eec2a78ea7a11
280 default 05c8205242b3f21b 82ab26f115ea5654
281 default 19e7ee44fbbf9d44 a80d9d79d992f10d
282 default eaf16c4ad0b44d31 913d52d7e580a963
283 default bc25acedd39d221e 2d0cbbbb0f73bee1
284 default 8c7e61bcc8dfaf02 53cf1e92d5fd005a
285 default ac575526f6581178 77daa512b3b0553e
286 default a084e4d00fc1fa93 fd48f42bb366dfb0
287 default e46a6c6ac9ab2e70 be858c9bba4175f7
288 default 37db98240896c1f0 15df6c44086810f6
289 default cabf4e6f9db1bbef afda5ba8ab7e2fdf
290 default d33b9cc6fcef176b da960eb709adeb1b
291 default 9163bb186c17d7dc c9546a9671443886
292 default ab4377d8730f4ebd 932a45ef98d55590
293 default 8febb6168e5c6c8b cdd3a8059089737b
294 default e91ad304d2f070a1 eb40f754408371c1
295 default ff44553ba4f9a383 d80bfd1b56290359
296 default d479b00f4003c188 4523cd6b7432df21
297 default 9cc4a1d728c05992 0a8f921bc67fcb2f
298 default 02ab565535aabb0a 658626be6d73f96c
299 default c918189a74ff13e1 a3910d1c3709d78f
300 default 84113202324d0355 310d14a651326f83
0 tfidf -
0 jieba -
0 chars -
0 bigrams -
0 shingle3 -
0 top_k -
0 nostop -
10 tfidf -
10 jieba -
10 chars -
10 bigrams 36c1742b735ad64c cd7d51340e8e1299
10 shingle3 -
10 top_k -
10 nostop -
20 tfidf db4d94458bac8407 0b81f3b44bd925ca
20 jieba fb4d90558ba48405 4c1e981c10b0f5e6
20 chars 634129510cadd781 1294168486570963
20 bigrams 0344f0c589c8009f 24080e3701b3cfe0
20 shingle3 d44c57c62c55c488 f61095fa8043bdc6
20 top_k 2c236f0a8ce3d86d 0593fe76bce6e41f
20 nostop c34d901589840405 bfadc3af0a4d75be
30 tfidf ed95a71c30df3ad3 3f12c7bfcda8df33
30 jieba ed15a71c71ff3ad1 aab70f06a0d0dc35
30 chars 034683d8e265c012 58bbca79ff3a7097
30 bigrams d02b222c5947b9ff 7e611a075f3aadc3
30 shingle3 242289e70dfc2739 60c3ab8b3f1778e7
30 top_k 91edede841908af8 88ed158ed9e72ba4
30 nostop 6801a7ac30f938d5 379be9dc77aca01d
40 tfidf 64f522aca4469af5 c431c9d33b54f653
40 jieba 6cf522aca2729ef0 5522f1d858def66a
40 chars 437063bdd265c97e 5cf08da290aa2023
40 bigrams 52c731e63a5603d4 8fb5dbb337065617
40 shingle3 95d4a27d07764f7e eeecb09f2c9570a2
40 top_k e1c5f9b443f00479 57368c3a25a8a02e
40 nostop 64c422ac0e771dd5 dedca07073bd1bae
50 tfidf c9c4735cb4439bf0 487a0c0ceebb312f
50 jieba cbc6335cb1439ff0 c74934ca03e2c55e
50 chars b2d60b9d8224d9ba 8bf037011c717c92
50 bigrams 434d3824125299f1 64e7a1f9fcf41faf
50 shingle3 30ec1139d7642619 7afb6ed91429c965
50 top_k f18cadd6c192c9f8 aa5358cdd56e537f
50 nostop 69c4174c9d4399b1 12b774f650403dfc
60 tfidf ae0ecd4451d70bb1 7ccc982122b5c35c
60 jieba ee0ecd5871d78321 efe1608b26ea5f05
60 chars 6c967519b540f913 d49331e415480fdc
60 bigrams c457084cd2d3935f 1608979477801335
60 shingle3 75ad0b3b392804f3 57415665833302a9
60 top_k 83101d217b0ba8d5 af3373789751fb9d
60 nostop ae06c54c51d703b9 88a5acf6ce2b93e4
70 tfidf 4ab4660ca57a9cb0 f2ca195e0845afc2
70 jieba 4bbc260ca16a8cb0 5af5daf8d08a6411
70 chars 3bf6749dc3655982 9716a7933ccc8966
70 bigrams c3ed7a8d18429891 7b5fcb1168ce7933
70 shingle3 15ce96b7c525157b 0a7a2b0fdd3c5b0d
70 top_k a586dd7771264ff1 64417c786b466aea
70 nostop 4aac968c957a8091 d2c69a9daf557c52
80 tfidf cca763728c9b0f3d 8bff64978523320c
80 jieba 8cb73346ad838f3b a35bf74da99eff72
80 chars 7b162b3cc111db32 6800769a426fe5fa
80 bigrams 8a672106868a8f38 e9b38668b11902c9
80 shingle3 71b7557311b821d8 b8c78164c0652da6
80 top_k 4100df99892004fb 627c66b4e352d446
80 nostop 8ea7f346ad838f39 fc3a45d4dffb3978
90 tfidf d9c666d0a4de9af0 fb54f2832bfc630b
90 jieba c9ce67d9a5cf9af8 9814aa347e0df49a
90 chars 11f7249dda4559ae ec56664d4d05698c
90 bigrams 81c4d568b28a0a05 a3316c6edc3882d3
90 shingle3 94e655d7ad7804e9 c7e24988324b277a
90 top_k 67161e2b054947d3 f724c13eca81dfd4
90 nostop 49cec7e8b5ca9ab4 4cb7ca4e67830984
100 tfidf 4d37e72327d9993e afa542c01e134200
100 jieba 4d37e72327d9993e afa542c01e134200
100 chars 4d37e72327d9993e afa542c01e134200
100 bigrams 4d37e72327d9993e afa542c01e134200
100 shingle3 c45480feae8b8cc9 21951da4b8c5eafa
100 top_k 44b23678b5c1f759 16e0870eb6abeece
100 nostop 4936c72367cbd93e 14255eafe03cc9fe
110 tfidf 49fe7b708bd39ffa 8344c4e74b5e0ffd
110 jieba 49de7b708bd39ff2 6b9a497bf95717e0
110 chars 11f4631ac3f2cede a3fa36d9a3aa2267
110 bigrams 09d578e016729bab 358d6ff5f6aa8f72
110 shingle3 5aa21c11b71b7cc9 0aedac8f130e25fc
110 top_k 6563b19ea02058fa e78c4dc2a23e1336
110 nostop 69de7ff889d29dbb 79b16b6930aa8e7c
120 tfidf d4ea5654f7cb8498 f942195deba6c5a9
120 jieba 50aa4654f54b84b8 0ec22819101d3280
120 chars fd87a755e56637f4 bbb63049f37229e9
120 bigrams 80eef58875da8c85 7151abcb3bb2494f
120 shingle3 80e30686c92481c1 ada9642e31bfc0de
120 top_k b75a3a3d354d5ff1 40aaa5fe0946f2dc
120 nostop 40ead744f7db8491 d792137f957142c4
130 tfidf 91c657153de904f0 71b524a7aba092e8
130 jieba 91c6571d31e98490 17584d8b23bdf293
130 chars 33cf109cc3715bb2 a773386648aa3e0b
130 bigrams 854556cd306a0938 21536d792e19d428
130 shingle3 04fcd7df452cf39b 7afd2f40833d773f
130 top_k c696683163454d01 d6fe023d4a8ba56e
130 nostop 41e4571d35e884d0 8ee931c9a57ad2d7
140 tfidf c1b9b26913875894 af5cb5e45ec99b05
140 jieba c1b9b26913875894 af5cb5e45ec99b05
140 chars c1b9b26913875894 af5cb5e45ec99b05
140 bigrams c1b9b26913875894 af5cb5e45ec99b05
140 shingle3 f99378def20f65fe 077b4dafe44d4ec8
140 top_k 82501582670aa43f 32bce91fbf21587c
140 nostop 41b1b26903054894 04dd839a2fba6847
150 tfidf 629d22fc7f105e76 2ff91fe26681a574
150 jieba 62bc22fc7f105e72 0519db37bdf230f0
150 chars 629c32e85f1c5c76 3edbb3f5ee8d5041
150 bigrams 628d62f87f505e76 29cc32da87a909b1
150 shingle3 240368ac0422f591 6f541b143631eb23
150 top_k 041b88702660a0c7 5fa763f5451b351d
150 nostop e29d32fc5f505c72 10ab2ce46f76f910
160 tfidf cc8ba4bebf80a412 a7eed85dffb8939b
160 jieba cc8ba4bebf80a412 a7eed85dffb8939b
160 chars cc8ba4beff80a712 aa1813e6f55d8494
160 bigrams 6d8bc4d63e89251a e362fa6358a8e8ca
160 shingle3 c8dc5dca5aeb063f 2ce5eca8b062d15e
160 top_k 2528501e284e91b7 60be2eafe5142c22
160 nostop ad8b84ae3f899422 9a4df32bf5c4987f
170 tfidf f427f97c83fe3da3 59bd69d0dcb0f4bf
170 jieba f427f97c83fe3da3 59bd69d0dcb0f4bf
170 chars f427f97c83fe3da3 59bd69d0dcb0f4bf
170 bigrams f427f97c83fe3da3 59bd69d0dcb0f4bf
170 shingle3 238e6ef6615f8a11 0a756c085ff7ed8c
170 top_k dfb86bd13a4bee80 8556d7f2676326ca
170 nostop f505faf483da2da3 d235df27a9077cf1
180 tfidf c5e80a564d0d8454 f641d3b0c41e843d
180 jieba c5e00a4441058454 856e644654baf325
180 chars c5e00a4441058454 856e644654baf325
180 bigrams c1e60b54410d8752 8940c71b1d14a886
180 shingle3 5a4b1984f4e0767f 98037336237aea3d
180 top_k 72f314f8193442cf a248ff8632bc06ae
180 nostop c1e61ac86125cd46 703ce60beb3faf4c
190 tfidf 914add839e1d7c1a 2f1decba38cac22c
190 jieba 814ad98298117c1a 4c8f64e1e7c35dcd
190 chars 814ad98298117c1a 4c8f64e1e7c35dcd
190 bigrams 004acdad3e19fd58 2f3b346507e0c162
190 shingle3 183432400e423c07 2349d8c6086c4a7b
190 top_k 12871aecac0bfca6 c0158eba377b9d01
190 nostop 034aac800e117808 ebc05b51dd291df4
200 tfidf 28efc8488f2e5354 db082959edc0a602
200 jieba 28efc8488f2e5354 db082959edc0a602
200 chars 28efc8488f2e5354 db082959edc0a602
200 bigrams 28efc8488f2e5354 db082959edc0a602
200 shingle3 28efc8488f2e5354 db082959edc0a602
200 top_k 28efc8488f2e5354 db082959edc0a602
200 nostop 28efc8488f2e5354 db082959edc0a602
210 tfidf 9767222050604094 2dcb2b9a33344096
210 jieba 9767222050604094 2dcb2b9a33344096
210 chars 956f20211160c084 8db0bee75c46835e
210 bigrams 95672a20516040b4 b6ee0ea73799d432
210 shingle3 d2848007a6c8b578 2710f830f2161cab
210 top_k 611962ece1aba42e b18be01c4d62f1da
210 nostop 95670a2010604094 31695a09a272471b
220 tfidf ddc71b8bf56768bc dcfbf5105392a504
220 jieba ddc31389f56768bc 0c71494ce8127723
220 chars ddc31389f56768bc 0c71494ce8127723
220 bigrams dcd581cbf5476af4 6dc35dcce41faf12
220 shingle3 f86ec0d8efc60334 940b7cf347e10a53
220 top_k feedacfa94690ecf 81ac2d3edd51749d
220 nostop dcd7828935476ab4 ed63e559aa2e6715
230 tfidf bf226e02e6dd996f 096acf6b9b639775
230 jieba bf226e02e6dd996f 096acf6b9b639775
230 chars bf226e02e6dd996f 096acf6b9b639775
230 bigrams bf226e02e6dd996f 096acf6b9b639775
230 shingle3 bf226e02e6dd996f 096acf6b9b639775
230 top_k bf226e02e6dd996f 096acf6b9b639775
230 nostop bf226e02e6dd996f 096acf6b9b639775
240 tfidf 63a962778fc0605d e680c589df8fdd52
240 jieba 632962778fc0605d 0a75b86c8214d863
240 chars 632962778fc0605d 0a75b86c8214d863
240 bigrams 63a96247afc06459 78ffa94d3f1ba83a
240 shingle3 a810caefd5afc7f6 87082726b6c5ede7
240 top_k c60b14b028041a11 94f02a810249200b
240 nostop f3a96207af5264dd db3fd70a0b88d650
250 tfidf 6379cee46af33e8c c8c9c4983f33f225
250 jieba 6379cee46af33e8c c8c9c4983f33f225
250 chars 6379cee46af33e8c c8c9c4983f33f225
250 bigrams e37884646af33e8c 1898697d9c64c87d
250 shingle3 6ec3d751485efedf 4a70ce98d12a6962
250 top_k 25edde7e51973bd5 e6a559f25b8c2281
250 nostop e3598ee4eaf33e8c 352e337b022cb0bd
260 tfidf f0442954a7f1ace5 ec6fa9bcd8d85483
260 jieba b0442154a7f0aca5 26bbf89ab93eab1d
260 chars b0442154a7f0aca5 26bbf89ab93eab1d
260 bigrams b0442154a7f0aca5 26bbf89ab93eab1d
260 shingle3 13695a8ec9def724 f70a18d2bcc63ba2
260 top_k 4927b6b8b0113590 08f7e569a3a77f6e
260 nostop b3c42914a7b0adf5 ba540db94b299d92
270 tfidf 487a546baa5cd94d 0b97946b3b3ff500
270 jieba 487ad46bae5cc94d 5ff4504a3fb98728
270 chars 487ad46bae5cc94d 5ff4504a3fb98728
270 bigrams 4879706be61cc8c4 f74f80c64ed226d7
270 shingle3 b3531e970dc56d7a a0aa0bd9acddfe81
270 top_k 2e8ea087c0725ca6 15b31722b0ae9974
270 nostop 48f878ebfa5dc1c5 42445e301d260cc3
280 tfidf 05c8205242b3f21b 82ab26f115ea5654
280 jieba 05c8205242b3f21b 82ab26f115ea5654
280 chars 05c8205242b3f21b 82ab26f115ea5654
280 bigrams 05c8205242b3f21b 82ab26f115ea5654
280 shingle3 a6773f1fe7fb3fa3 f1f96d1392767c52
280 top_k 7c81f2d3039f68a7 969d7c7bf481e48c
280 nostop 25ce2c5312335235 1776d73c3a0bbdb2
290 tfidf d33b9cc6fcef176b da960eb709adeb1b
290 jieba d33b9cc6fcef176b da960eb709adeb1b
290 chars d33b9cc6fcef176b da960eb709adeb1b
290 bigrams d33b9cc6fcef176b da960eb709adeb1b
290 shingle3 635dfd7f66f14cac dd85eb4ad85cfef6
290 top_k 66e1ca36cf884cb8 6245413a789b9806
290 nostop d33b9cc6fcef176b da960eb709adeb1b
300 tfidf 84113202324d0355 310d14a651326f83
300 jieba 84113202324d0355 310d14a651326f83
300 chars 84113202324d0355 310d14a651326f83
300 bigrams 84113202324d0355 310d14a651326f83
300 shingle3 87f31d7a689a02b6 17b6b0db5aa197da
300 top_k 2d21513229fc057a eaf647da9baed9cd
300 nostop 84113202324d0355 310d14a651326f83
"""


def test_generated_set_is_what_the_table_was_made_from() -> None:
    assert len(texts()) == 301
    assert len(EXPECTED.split("\n")) - 2 == len(cases())


@pytest.mark.parametrize("chunk", range(4))
def test_fingerprints_are_bit_identical_to_the_table(chunk: int) -> None:
    all_texts = texts()
    expected = EXPECTED.strip().split("\n")
    rows = list(zip(cases(), expected, strict=True))[chunk::4]
    diffs = [
        (want, got) for (i, name), want in rows if (got := compute(i, name, all_texts[i])) != want
    ]
    assert not diffs, f"{len(diffs)} fingerprints changed, first: {diffs[:3]}"


@pytest.mark.parametrize("segmenter", ["rjieba", "jieba", "chars", "bigrams"])
def test_token_counts_are_the_counts_of_the_tokens_in_order(segmenter: Segmenter) -> None:
    # token_counts (the default pipeline's fast path) against tokenize (one token at a time)
    step = 1 if segmenter == "rjieba" else 5
    for text in texts()[::step]:
        want = list(Counter(tokenize(text, segmenter)).items())
        assert list(token_counts(text, segmenter).items()) == want, text[:80]


def test_token_counts_of_texts_without_han_or_no_space_scripts() -> None:
    # the seeded texts with their Han and no-space characters taken out (each replaced by a
    # space, a letter or nothing): plain texts, which token_counts splits instead of matching;
    # the counts, in order, are still those of tokenize (the regex)
    special = re.compile(f"[{_HAN}{_NOSPACE}]")
    plain = [special.sub(rep, text) for text in texts() for rep in (" ", "", "q")]
    plain = [text for text in plain if text]
    assert len(plain) > 800
    for text in plain:
        want = list(Counter(tokenize(text)).items())
        assert list(token_counts(text).items()) == want, ascii(text[:80])
