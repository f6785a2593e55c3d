package app

import "github.com/postmill/postmill/core/template"

// coreTemplate builds the template service, which is also the core's Renderer: sending renders template
// references through it.
func (a *App) coreTemplate(env *coreEnv) error {
	reactRenderer, err := a.reactRenderer()
	if err != nil {
		return err
	}
	templates, err := template.New(template.Deps{Store: env.store, React: reactRenderer, Clock: env.clock})
	if err != nil {
		return err
	}
	env.core.Templates, env.core.Renderer = templates, templates
	return nil
}
