package meter

import "strings"

// providerHosts maps API host names to semconv gen_ai.provider.name values,
// so traffic is labelled by who actually served it when configuration does
// not say. Matching is by suffix on a dot boundary.
var providerHosts = []struct{ suffix, provider string }{
	{"api.openai.com", "openai"},
	{"openai.azure.com", "azure.ai.openai"},
	{"services.ai.azure.com", "azure.ai.inference"},
	{"models.ai.azure.com", "azure.ai.inference"},
	{"api.anthropic.com", "anthropic"},
	{"generativelanguage.googleapis.com", "gcp.gemini"},
	{"aiplatform.googleapis.com", "gcp.vertex_ai"},
	{"api.groq.com", "groq"},
	{"api.deepseek.com", "deepseek"},
	{"api.mistral.ai", "mistral_ai"},
	{"api.cohere.com", "cohere"},
	{"api.cohere.ai", "cohere"},
	{"api.x.ai", "x_ai"},
	{"api.perplexity.ai", "perplexity"},
	{"openrouter.ai", "openrouter"},
	{"api.together.xyz", "together_ai"},
	{"api.fireworks.ai", "fireworks_ai"},
}

// ProviderForHost returns the provider name for an upstream host, or "" when
// the host is not a known provider (a self-hosted server, the simulator).
func ProviderForHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	// Vertex AI's regional hosts put the region before a dash:
	// us-central1-aiplatform.googleapis.com.
	if strings.HasSuffix(host, "-aiplatform.googleapis.com") {
		return "gcp.vertex_ai"
	}
	if strings.HasPrefix(host, "bedrock-runtime.") && strings.HasSuffix(host, ".amazonaws.com") {
		return "aws.bedrock"
	}
	for _, p := range providerHosts {
		if host == p.suffix || isSubdomain(host, p.suffix) {
			return p.provider
		}
	}
	return ""
}

// isSubdomain reports whether host ends in "." + domain, without building
// that string: this runs once per request, for every known provider.
func isSubdomain(host, domain string) bool {
	n := len(host) - len(domain)
	return n > 0 && host[n-1] == '.' && host[n:] == domain
}
