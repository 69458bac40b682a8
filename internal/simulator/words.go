package simulator

// words is the vocabulary of simulated output. Every entry is a common
// English word with a leading space, which real BPE tokenizers (cl100k,
// o200k, Llama's) encode as exactly one token; so one streamed chunk per word
// is one token, and a client that counts tokens itself agrees with the
// simulator's completion_tokens.
var words = [...]string{
	" the", " of", " and", " to", " in", " is", " that", " for", " it", " as",
	" with", " was", " on", " be", " at", " by", " this", " are", " from", " or",
	" have", " an", " they", " which", " one", " you", " were", " all", " we", " can",
	" their", " has", " there", " been", " if", " more", " when", " will", " would", " who",
	" so", " no", " time", " model", " speed", " first", " new", " after", " also", " two",
	" work", " how", " its", " our", " out", " up", " about", " into", " than", " other",
	" some", " could", " these", " may", " then", " do", " any", " like", " my", " now",
	" over", " such", " only", " most", " very", " just", " well", " where", " what", " because",
	" through", " each", " many", " before", " should", " between", " those", " under", " while", " both",
	" same", " long", " great", " world", " year", " day", " way", " people", " part", " life",
	" fact", " case", " point", " number", " group", " problem", " place", " state", " result", " question",
	" answer", " reason", " example", " value", " level", " order", " power", " light", " water", " line",
	" name", " city", " home", " house", " road", " room", " word", " book", " story", " idea",
	" form", " change", " process", " report", " service", " network", " server", " request", " data", " system",
	" fast", " slow", " small", " large", " good", " high", " low", " next", " last", " early",
	" simple", " clear", " open", " real", " true", " full", " free", " short", " easy", " hard",
	" make", " take", " give", " find", " know", " think", " see", " come", " look", " use",
	" run", " move", " send", " read", " write", " build", " test", " start", " stop", " wait",
}
