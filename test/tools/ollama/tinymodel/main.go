// Command tinymodel writes a tiny llama-architecture model as GGUF, with
// Ollama's own writer (github.com/ollama/ollama/fs/ggml.WriteGGUF), for
// tests that need a real inference server to generate tokens fast and the
// same way every time.
//
//	tinymodel -o words.gguf              # every token a whole word
//	tinymodel -o bytes.gguf -vocab bytes # some characters spelled as bytes
//	tinymodel -o slow.gguf -ffn 32768    # milliseconds per token, not 0.2
//
// The model is 64 wide with 2 blocks, 4 heads and a feed-forward layer of
// 128 (-ffn), in F32 (1.1 MB), with weights drawn from a fixed seed: the
// same flags always write the same bytes. Its vocabulary (1,517 tokens) is
// SentencePiece style ("llama" tokenizer): <unk>, <s>, </s>, the 256 byte
// tokens <0x00>..<0xFF> (llama.cpp falls back to them for any text its
// pieces do not cover, and throws an exception without them), and a list
// of English words as "▁word" with every prefix of each ("▁", "▁w", "▁wo",
// ...), the path by which llama.cpp's SentencePiece merges reach the word.
// Llama architectures run on Ollama's llama.cpp runner ("llamarunner").
//
// The weights are random but laid out so that the model only ever emits
// what the variant allows. Dimension 0 of every embedding is a constant
// 0.5, so that after the final RMSNorm it is about 3.6 whatever the
// token: an output row with -10 there gives its token a logit near -36, far
// below the others (within ±10 or so), and such a token is in effect never
// sampled. That row is given to every token the variant must not emit: the
// special tokens, the prefixes that are not words and, in the whole-word
// variant, every byte token. So with -vocab words every generated token is
// a whole word ("▁word", which decodes to " word") and each streamed chunk
// carries exactly one token.
//
// With -vocab bytes the model also spells é, €, 日 and 🎉 as their UTF-8
// bytes (2, 3, 3 and 4 byte tokens). Each byte token has an embedding
// dimension of its own (1-12), and the output row of the byte that must
// follow it has a large weight there, so a lead byte is always followed by
// the rest of its character: Ollama holds partial UTF-8 back and sends the
// character as one chunk that carries several tokens. The four lead bytes
// have a bonus so that about one token in nine starts a character (14 to
// 16 characters in 96 tokens).
//
// The two transformer blocks have small random weights (attention 0.02,
// feed-forward 0.05, ffn_down scaled by the layer's width): they run the
// real computation and make the next token depend on the context, without
// overriding the layout above. A wider feed-forward layer (-ffn) only makes
// each token cost more: 32768 (50 MB) takes about 8 ms a token on one core,
// as real models do, where the default takes 0.2 ms, less than the work
// around it.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/fs/ggml"
)

const (
	embed   = 64
	blocks  = 2
	heads   = 4
	context = 2048

	// The layout of the embedding dimensions.
	dimCommon    = 0  // 0.5 in every token's embedding
	firstByteDim = 1  // one per emitted byte token, in byteChars' order
	firstContent = 13 // the random content of every other token
)

// byteChars are the characters the byte variant spells byte by byte. No
// byte appears twice, so each byte token has one successor.
var byteChars = []string{"é", "€", "日", "🎉"}

// words is the vocabulary's words, each a token "▁word". The tests' prompts
// are made of them (others fall back to bytes, which works too).
var words = strings.Fields(`
the of and to a in is it you that he was for on are with as his they be at
one have this from or had by hot word but what some we can out other were all
there when up use your how said an each she which do their time if will way
about many then them write would like so these her long make thing see him
two has look more day could go come did number sound no most people my over
know water than call first who may down side been now find any new work part
take get place made live where after back little only round man year came show
every good me give our under name very through just form sentence great think
say help low line differ turn cause much mean before move right boy old too
same tell does set three want air well also play small end put home read hand
port large spell add even land here must big high such follow act why ask men
change went light kind off need house picture try us again animal point mother
world near build self earth father head stand own page should country found
answer school grow study still learn plant cover food sun four between state
keep eye never last let thought city tree cross farm hard start might story saw
far sea draw left late run while press close night real life few north open
seem together next white children begin got walk example ease paper group
always music those both mark often letter until mile river car feet care second
book carry took science eat room friend began idea fish mountain stop once base
hear horse cut sure watch color face wood main enough plain girl usual young
ready above ever red list though feel talk bird soon body dog family direct
pose leave song measure door product black short numeral class wind question
happen complete ship area half rock order fire south problem piece told knew
pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six
table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern
pull cold notice voice unit power town fine certain fly fall lead cry dark
machine note wait plan figure star box noun field rest correct able pound done
beauty drive stood contain front teach week final gave green oh quick develop
ocean warm free minute strong special mind behind clear tail produce fact
street inch multiply nothing course stay wheel full force blue object decide
surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate miss
brought heat snow tire bring yes distant fill east paint language among user
assistant system`)

// Token types as llama.cpp reads tokenizer.ggml.token_type.
const (
	typeNormal  = 1
	typeUnknown = 2
	typeControl = 3
	typeByte    = 6
)

type vocabulary struct {
	tokens []string
	scores []float32
	types  []int32
	// emit is true for the tokens the model may generate.
	emit []bool
	// byteDim is the embedding dimension of each emitted byte token, and
	// next the token that must follow it (-1 after a character's last
	// byte); lead marks the first byte of a character.
	byteDim map[int]int
	next    map[int]int
	lead    map[int]bool
	// last lists the characters' last bytes, after which any word may
	// come, in byteChars' order.
	last []int
}

func buildVocabulary(withBytes bool) *vocabulary {
	v := &vocabulary{byteDim: map[int]int{}, next: map[int]int{}, lead: map[int]bool{}}
	add := func(tok string, score float32, typ int32) int {
		v.tokens = append(v.tokens, tok)
		v.scores = append(v.scores, score)
		v.types = append(v.types, typ)
		v.emit = append(v.emit, false)
		return len(v.tokens) - 1
	}
	add("<unk>", 0, typeUnknown)
	add("<s>", 0, typeControl)
	add("</s>", 0, typeControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, typeByte)
	}
	// Each word's prefixes ("▁", "▁w", "▁wo", ...) and the word itself,
	// once each: a prefix that is itself a word is that word's token.
	// SentencePiece merges the pair with the highest score first; each word
	// has one merge path, so the scores (shorter first) only order the
	// vocabulary.
	index := map[string]int{}
	seen := map[string]bool{}
	var pieces []string
	var unique []string
	for _, w := range words {
		if seen[w] {
			continue
		}
		seen[w] = true
		unique = append(unique, w)
		p := "▁" + w
		for i := range p { // i at the start of each rune
			if i > 0 && !slices.Contains(pieces, p[:i]) {
				pieces = append(pieces, p[:i])
			}
		}
		if !slices.Contains(pieces, p) {
			pieces = append(pieces, p)
		}
	}
	for _, piece := range pieces {
		index[piece] = add(piece, -float32(utf8.RuneCountInString(piece)), typeNormal)
	}
	for _, w := range unique {
		v.emit[index["▁"+w]] = true
	}
	if withBytes {
		dim := firstByteDim
		for _, c := range byteChars {
			for i := range len(c) {
				id := 3 + int(c[i])
				v.emit[id] = true
				v.byteDim[id] = dim
				dim++
				if i == 0 {
					v.lead[id] = true
				}
				if i+1 < len(c) {
					v.next[id] = 3 + int(c[i+1])
				} else {
					v.last = append(v.last, id)
				}
			}
		}
		if dim > firstContent {
			panic("too many byte tokens for the dimensions set aside")
		}
	}
	return v
}

// f32 is a tensor's data in GGUF's order: the first dimension varies
// fastest, so row r of an [n, m] tensor (m rows of n) is data[r*n:(r+1)*n].
type f32 []float32

func (d f32) WriteTo(w io.Writer) (int64, error) {
	b := make([]byte, 4*len(d))
	for i, x := range d {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	n, err := w.Write(b)
	return int64(n), err
}

func main() {
	out := flag.String("o", "", "the GGUF file to write")
	vocab := flag.String("vocab", "words", "words: every token a whole word; bytes: also characters spelled as UTF-8 byte tokens")
	seed := flag.Uint64("seed", 1, "the seed of the random weights")
	ffn := flag.Int("ffn", 128, "the feed-forward layer's width: a wider one makes each token cost more to compute")
	flag.Parse()
	if *out == "" || (*vocab != "words" && *vocab != "bytes") || *ffn < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*out, *vocab == "bytes", *seed, *ffn); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

func write(path string, withBytes bool, seed uint64, ffn int) error {
	v := buildVocabulary(withBytes)
	n := len(v.tokens)
	rng := rand.New(rand.NewPCG(seed, 0x746f6b656e746170)) // "tokentap"
	normal := func(std float64) float32 { return float32(rng.NormFloat64() * std) }
	random := func(size int, std float64) f32 {
		d := make(f32, size)
		for i := range d {
			d[i] = normal(std)
		}
		return d
	}
	ones := func(size int) f32 {
		d := make(f32, size)
		for i := range d {
			d[i] = 1
		}
		return d
	}

	// Embeddings: 0.5 in dimension 0; an emitted byte token 1 in its own
	// dimension; every other token random content of norm about 1.
	contentStd := 1 / math.Sqrt(embed-firstContent)
	emb := make(f32, embed*n)
	for t := range n {
		row := emb[t*embed : (t+1)*embed]
		row[dimCommon] = 0.5
		if dim, ok := v.byteDim[t]; ok {
			row[dim] = 1
			continue
		}
		for i := firstContent; i < embed; i++ {
			row[i] = normal(contentStd)
		}
	}

	// Output rows: see the package comment.
	const (
		forbid   = -10  // dimension 0 of a token never to emit
		leadBias = 2.0  // dimension 0 of a lead byte
		follow   = 12   // a byte's successor, in the byte's dimension
		wordStd  = 0.42 // logits of about ±3 between words
	)
	output := make(f32, embed*n)
	for t := range n {
		row := output[t*embed : (t+1)*embed]
		if !v.emit[t] {
			row[dimCommon] = forbid
			continue
		}
		if _, isByte := v.byteDim[t]; isByte && !v.lead[t] {
			// Only ever after its predecessor, through follow below.
			row[dimCommon] = forbid
			continue
		}
		if v.lead[t] {
			row[dimCommon] = leadBias
		}
		for i := firstContent; i < embed; i++ {
			row[i] = normal(wordStd)
		}
		// After a character's last byte, any word or lead byte may come.
		for _, b := range v.last {
			row[v.byteDim[b]] = normal(wordStd)
		}
	}
	for b, succ := range v.next {
		output[succ*embed+v.byteDim[b]] = follow
	}

	headDim := embed / heads
	// ffn_down sums over the layer's width: scaled so that a wider layer
	// adds as much to the residual stream as one of 128.
	downStd := 0.05 * math.Sqrt(128/float64(ffn))
	ts := []*ggml.Tensor{
		tensor("token_embd.weight", emb, embed, n),
		tensor("output_norm.weight", ones(embed), embed),
		tensor("output.weight", output, embed, n),
	}
	for i := range blocks {
		name := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", i, s) }
		ts = append(ts,
			tensor(name("attn_norm"), ones(embed), embed),
			tensor(name("attn_q"), random(embed*embed, 0.02), embed, embed),
			tensor(name("attn_k"), random(embed*embed, 0.02), embed, embed),
			tensor(name("attn_v"), random(embed*embed, 0.02), embed, embed),
			tensor(name("attn_output"), random(embed*embed, 0.02), embed, embed),
			tensor(name("ffn_norm"), ones(embed), embed),
			tensor(name("ffn_gate"), random(embed*ffn, 0.05), embed, ffn),
			tensor(name("ffn_up"), random(embed*ffn, 0.05), embed, ffn),
			tensor(name("ffn_down"), random(ffn*embed, downStd), ffn, embed),
		)
	}

	name := "tokentap-tiny-words"
	if withBytes {
		name = "tokentap-tiny-bytes"
	}
	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           name,
		"general.file_type":                      uint32(0), // all F32
		"llama.context_length":                   uint32(context),
		"llama.embedding_length":                 uint32(embed),
		"llama.block_count":                      uint32(blocks),
		"llama.feed_forward_length":              uint32(ffn),
		"llama.attention.head_count":             uint32(heads),
		"llama.attention.head_count_kv":          uint32(heads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(n),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.tokens":                  v.tokens,
		"tokenizer.ggml.scores":                  v.scores,
		"tokenizer.ggml.token_type":              v.types,
		"tokenizer.ggml.unknown_token_id":        uint32(0),
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(2),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tensor is an F32 tensor of the given shape (first dimension fastest).
func tensor(name string, data f32, shape ...int) *ggml.Tensor {
	s := make([]uint64, len(shape))
	size := 1
	for i, d := range shape {
		s[i] = uint64(d)
		size *= d
	}
	if size != len(data) {
		panic(fmt.Sprintf("%s: %d values for shape %v", name, len(data), shape))
	}
	return &ggml.Tensor{Name: name, Kind: uint32(ggml.TensorTypeF32), Shape: s, WriterTo: data}
}
