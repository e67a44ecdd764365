"""No models: Dogs' collections are not Django tables. The module is here so that Django sends
``post_migrate`` for this app, after which Dogs sets up its collections and indexes
(:func:`dogs_integrations.django.apps.set_up_collections`)."""
